package offload

import (
	"os"
	"testing"
)

const procStatusSample = `Name:	ferry-virtual-k
VmPeak:	 1300000 kB
VmHWM:	   61440 kB
VmRSS:	   51200 kB
Threads:	12
`

func TestProcStatusBytesReadsKilobyteFields(t *testing.T) {
	for field, want := range map[string]int64{"VmHWM": 60 << 20, "VmRSS": 50 << 20} {
		got, err := procStatusBytes(procStatusSample, field)
		if err != nil || got != want {
			t.Errorf("procStatusBytes(%s) = %d, %v; want %d", field, got, err, want)
		}
	}
	if _, err := procStatusBytes(procStatusSample, "VmSwap"); err == nil {
		t.Error("a missing field gave no error")
	}
	if _, err := procStatusBytes("VmRSS:\tlots\n", "VmRSS"); err == nil {
		t.Error("a malformed field gave no error")
	}
}

func TestSampleMemoryOfThisProcess(t *testing.T) {
	m, err := sampleMemory(os.Getpid(), memorySamplePeriod)
	if err != nil {
		t.Fatal(err)
	}
	peak, last, err := m.stop()
	if err != nil {
		t.Fatal(err)
	}
	if last <= 0 || peak < last {
		t.Errorf("peak %d, last %d: want 0 < last <= peak", peak, last)
	}
	if _, err := sampleMemory(0, memorySamplePeriod); err == nil {
		t.Error("no error for a process that does not run")
	}
}
