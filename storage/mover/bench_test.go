package mover

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkServeFetch copies a 256 MiB tree (one 224 MiB file, many small
// ones) from serve to fetch on loopback, verification included; MB/s is
// the whole fetch's rate.
func BenchmarkServeFetch(b *testing.B) { benchmarkCopy(b, false) }

// BenchmarkServeRelayFetch is BenchmarkServeFetch through a relay.
func BenchmarkServeRelayFetch(b *testing.B) { benchmarkCopy(b, true) }

func benchmarkCopy(b *testing.B, relay bool) {
	src, dst := b.TempDir(), b.TempDir()
	makeTree(b, src, 224<<20)
	sum, err := TreeDigest(src)
	if err != nil {
		b.Fatal(err)
	}
	addr := startServer(b, &Server{Dir: src})
	if relay {
		addr = startRelay(b, addr)
	}
	b.SetBytes(sum.Bytes)
	b.ResetTimer()
	for b.Loop() {
		f := &Fetcher{Dir: dst, From: addr}
		if _, err := f.Fetch(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkManySmallFiles copies 10,000 files of 1 KiB in 100
// directories: the per-entry cost (files/s is reported).
func BenchmarkManySmallFiles(b *testing.B) {
	src, dst := b.TempDir(), b.TempDir()
	data := make([]byte, 1024)
	for d := range 100 {
		dir := filepath.Join(src, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	addr := startServer(b, &Server{Dir: src})
	b.ResetTimer()
	for b.Loop() {
		if _, err := (&Fetcher{Dir: dst, From: addr}).Fetch(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(10000*b.N)/b.Elapsed().Seconds(), "files/s")
}
