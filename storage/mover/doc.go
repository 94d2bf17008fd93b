// Package mover is ferry-volume-mover, the data plane of moving a volume
// between clusters: it copies a directory tree (a volume's files) from a
// pod in one cluster to a pod in another over plain TCP, and verifies the
// copy.
//
// # Usage
//
//	ferry-volume-mover serve --dir=/data [--listen=:7070]
//	ferry-volume-mover fetch --dir=/data --from=HOST:PORT [--termination-log=/dev/termination-log] [--connect-timeout=2m]
//	ferry-volume-mover relay --to=HOST:PORT [--listen=:7070]
//
// serve runs beside the source volume and serves its tree read-only, to
// one fetch at a time: a new fetch ends the one being served (a fetch
// restarted after a cut tunnel must not wait for the old connection to
// time out). It keeps serving after each fetch, and exits 0 on SIGTERM.
// GET /healthz answers 200 (a readiness probe).
//
// fetch runs beside the target volume. It empties --dir first (a
// restarted copy starts clean, never a mix of two copies), keeps trying to
// reach --from for up to --connect-timeout, copies the tree, then
// verifies it: the SHA-256 digest of the source tree, which serve computes
// by reading the source again after the copy, must equal the digest fetch
// computes by reading back what it wrote. Every second, until it exits, it
// prints a Progress line on stdout ({"bytes":N,"totalBytes":T,"bytesPerSecond":R,"etaSeconds":E});
// logs go to stderr. On success it exits 0 and writes the Result
// ({"bytes":N,"files":F,"sha256":"<hex>"}) to --termination-log; on any
// failure (the connection lost, the digests differ, the source changed
// during the copy, a write failed) it exits 1 with a one-line reason there
// instead. ParseTerminationMessage reads either. A fetch killed mid-way
// leaves --dir incomplete: only a fetch that exited 0 with a Result copied
// the data.
//
// relay joins every connection it accepts to --to, for a copy between two
// providers, whose pod networks are joined to the consumer's but not to
// each other: it runs in the consumer. It exits 0 on SIGTERM.
//
// When the environment variable FERRY_MOVER_TOKEN (TokenEnv) is set for
// serve, GET /tree answers 401 to a fetch that does not present the same
// value (fetch sends its own FERRY_MOVER_TOKEN), and fetch fails at once:
// set it from one Secret in both pods so that nobody else reaching serve's
// port reads the volume.
//
// Usage errors exit 2. Run as root, fetch keeps owners; otherwise files are
// owned by whoever runs it.
//
// # What is copied
//
// Directories, regular files and symlinks, with their modes (permissions,
// setuid, setgid, sticky), mtimes and, as root, owners. Sockets, devices
// and named pipes are skipped (serve logs each); hard links arrive as
// separate files; sparse files arrive dense; extended attributes and ACLs
// are not copied.
//
// The digest (TreeDigest) covers every directory, regular file and symlink
// in a fixed order (depth first, each directory's entries sorted by name):
// its path, kind, mode, size, symlink target and content. It leaves out
// owners and times (a fetch that is not root cannot keep owners; a
// directory's mtime changes as it is filled).
//
// # Wire
//
// HTTP/1.1 over TCP: GET /tree answers the tree as a PAX tar stream (the
// standard library's archive/tar: long paths, sub-second times, large
// sizes and ids, a well-tested reader), with the source's total size in a
// header and both digests (of what was sent, and of the source read again)
// in trailers after it, so one request carries the whole copy and its
// proof. Each side reads and writes through fixed buffers: memory does not
// grow with file sizes. TCP keep-alives notice a peer gone without closing
// (a cut tunnel) within about 25 s.
package mover
