package mover

import (
	"testing"
)

// BenchmarkServeFetch copies a 256 MiB tree (one 224 MiB file, many small
// ones) from serve to fetch on loopback, verification included; MB/s is
// the whole fetch's rate.
func BenchmarkServeFetch(b *testing.B) {
	src, dst := b.TempDir(), b.TempDir()
	makeTree(b, src, 224<<20)
	sum, err := TreeDigest(src)
	if err != nil {
		b.Fatal(err)
	}
	addr := startServer(b, &Server{Dir: src})
	b.SetBytes(sum.Bytes)
	b.ResetTimer()
	for b.Loop() {
		f := &Fetcher{Dir: dst, From: addr}
		if _, err := f.Fetch(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
