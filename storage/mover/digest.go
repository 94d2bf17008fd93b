package mover

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Kinds of entries a tree holds, as the digest names them. Anything else
// (sockets, devices, named pipes) is skipped by serve and by the digest.
const (
	kindDir     = 'd'
	kindFile    = 'f'
	kindSymlink = 'l'
)

// Sum is a tree's digest and what it counted.
type Sum struct {
	// SHA256 is the lowercase hex digest (see TreeDigest).
	SHA256 string
	// Bytes is the sum of the regular files' sizes; Files their number.
	Bytes, Files int64
}

// digester hashes a tree's entries in walk order. Each entry is
//
//	path NUL kind SP octal-mode SP decimal-size NUL symlink-target NUL content
//
// where path is slash-separated relative to the root ("." for the root),
// mode holds the permission, setuid, setgid and sticky bits as chmod takes
// them, size and content are a regular file's (0 and nothing otherwise) and
// the target a symlink's (empty otherwise). No path or target holds NUL and
// the content's length is the size before it, so the encoding is
// unambiguous. Owners and times are not covered: a fetch that does not run
// as root cannot keep owners, and a directory's mtime changes as it is
// filled.
type digester struct {
	h          hash.Hash
	bytes, num int64
}

func newDigester() *digester { return &digester{h: sha256.New()} }

// entry hashes an entry's header; a regular file's content follows through
// Write.
func (d *digester) entry(path string, kind byte, mode int64, size int64, target string) {
	fmt.Fprintf(d.h, "%s\x00%c %o %d\x00%s\x00", path, kind, mode, size, target)
	if kind == kindFile {
		d.num++
		d.bytes += size
	}
}

func (d *digester) Write(p []byte) (int, error) { return d.h.Write(p) }

func (d *digester) sum() Sum {
	return Sum{SHA256: hex.EncodeToString(d.h.Sum(nil)), Bytes: d.bytes, Files: d.num}
}

// unixMode is m's permission and special bits as chmod(2) takes them.
func unixMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// fileMode is the inverse of unixMode.
func fileMode(v int64) fs.FileMode {
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// kindOf is the kind of an entry of mode m, 0 for one that is skipped.
func kindOf(m fs.FileMode) byte {
	switch {
	case m.IsRegular():
		return kindFile
	case m.IsDir():
		return kindDir
	case m&fs.ModeSymlink != 0:
		return kindSymlink
	}
	return 0
}

// walkTree calls fn for every directory, regular file and symlink under
// dir, the root first as ".", then depth first with each directory's
// entries sorted by name (fs.WalkDir's order), never following symlinks;
// skip is called for every other entry.
func walkTree(dir string, fn func(rel string, info fs.FileInfo, kind byte) error, skip func(rel string, info fs.FileInfo)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if rel == "." && !info.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		kind := kindOf(info.Mode())
		if kind == 0 {
			if skip != nil {
				skip(rel, info)
			}
			return nil
		}
		return fn(rel, info, kind)
	})
}

// TreeDigest reads the tree under dir and returns its digest: SHA-256 over
// every directory, regular file and symlink in walkTree's order, each
// entry's path, kind, mode, size, symlink target and content (see
// digester). Other entries are left out. It reads every file through a
// fixed buffer.
func TreeDigest(dir string) (Sum, error) {
	d := newDigester()
	buf := make([]byte, copyBuffer)
	err := walkTree(dir, func(rel string, info fs.FileInfo, kind byte) error {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		switch kind {
		case kindSymlink:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			d.entry(rel, kind, unixMode(info.Mode()), 0, target)
		case kindDir:
			d.entry(rel, kind, unixMode(info.Mode()), 0, "")
		case kindFile:
			f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			d.entry(rel, kind, unixMode(info.Mode()), info.Size(), "")
			if _, err := io.CopyBuffer(d, f, buf); err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
		}
		return nil
	}, nil)
	if err != nil {
		return Sum{}, fmt.Errorf("digest of %s: %w", dir, err)
	}
	return d.sum(), nil
}
