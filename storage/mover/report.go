package mover

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Progress is the line fetch prints on stdout every second while it
// copies, and once more when the copy ends:
//
//	{"bytes":N,"totalBytes":T,"bytesPerSecond":R,"etaSeconds":E}
//
// Bytes counts the regular files' content written so far; TotalBytes is
// the sum of the source's regular file sizes when the copy started;
// BytesPerSecond is the average rate since the first byte; ETASeconds is
// the time left at that rate, -1 while unknown (no byte copied yet).
type Progress struct {
	Bytes          int64 `json:"bytes"`
	TotalBytes     int64 `json:"totalBytes"`
	BytesPerSecond int64 `json:"bytesPerSecond"`
	ETASeconds     int64 `json:"etaSeconds"`
}

// Result is what a fetch that succeeded writes to its termination log:
//
//	{"bytes":N,"files":F,"sha256":"<hex>"}
//
// Bytes and Files are the regular files' total size and number; SHA256 is
// the tree's digest (TreeDigest), the same on both sides.
type Result struct {
	Bytes  int64  `json:"bytes"`
	Files  int64  `json:"files"`
	SHA256 string `json:"sha256"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseProgress parses one progress line.
func ParseProgress(line []byte) (Progress, error) {
	var p Progress
	if err := unmarshalObject(line, &p); err != nil {
		return Progress{}, fmt.Errorf("progress line %q: %w", truncate(string(line), 200), err)
	}
	if p.Bytes < 0 || p.TotalBytes < 0 || p.BytesPerSecond < 0 || p.ETASeconds < -1 {
		return Progress{}, fmt.Errorf("progress line %q: a negative count", truncate(string(line), 200))
	}
	return p, nil
}

// FailedError is a fetch's failure as its termination log says it.
type FailedError struct{ Reason string }

func (e *FailedError) Error() string { return "fetch failed: " + e.Reason }

// ParseTerminationMessage reads a fetch container's termination message:
// the Result of a fetch that succeeded, or a *FailedError with the reason
// of one that failed. A message that is neither (empty, a Result without a
// valid digest) is a *FailedError too: only a well-formed Result means the
// data was copied and verified.
func ParseTerminationMessage(msg string) (Result, error) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return Result{}, &FailedError{Reason: "no termination message"}
	}
	if !strings.HasPrefix(msg, "{") {
		return Result{}, &FailedError{Reason: msg}
	}
	var r Result
	if err := unmarshalObject([]byte(msg), &r); err != nil {
		return Result{}, &FailedError{Reason: fmt.Sprintf("termination message %q is not a result: %v", truncate(msg, 200), err)}
	}
	if !sha256Hex.MatchString(r.SHA256) || r.Bytes < 0 || r.Files < 0 {
		return Result{}, &FailedError{Reason: fmt.Sprintf("termination message %q is not a result: no valid sha256, bytes and files", truncate(msg, 200))}
	}
	return r, nil
}

// unmarshalObject decodes one JSON object, and nothing after it, into v;
// unknown fields are ignored, so that a newer mover's output still parses.
func unmarshalObject(data []byte, v any) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(data, v)
}

// maxReason bounds a failure reason; Kubernetes keeps at most 4096 bytes
// of a termination message.
const maxReason = 2048

// reasonLine is err as one line of at most maxReason bytes.
func reasonLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	return truncate(s, maxReason)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// writeTermination writes msg to path (the container's termination log),
// replacing what it held.
func writeTermination(path, msg string) error {
	if path == "" {
		return nil
	}
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		return fmt.Errorf("--termination-log %s: %w", path, err)
	}
	return nil
}
