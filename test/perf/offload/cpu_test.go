package offload

import (
	"testing"
)

func TestCPUUseIsTheDifferenceOfProcessesInBothSamples(t *testing.T) {
	before := cpuSample{"etcd": 1.0, "kube-apiserver": 2.0, "restarted": 5.0, "gone": 1.0}
	after := cpuSample{"etcd": 1.5, "kube-apiserver": 4.0, "restarted": 0.5, "new": 3.0}
	use := after.since(before)
	if len(use) != 2 || use["etcd"] != 0.5 || use["kube-apiserver"] != 2.0 {
		t.Fatalf("use = %v, want etcd 0.5 and kube-apiserver 2 only", use)
	}
	if got := use.total(); got != 2.5 {
		t.Errorf("total = %g, want 2.5", got)
	}
	if got, want := use.perPod(1000), "kube-apiserver 2.00, etcd 0.50"; got != want {
		t.Errorf("perPod = %q, want %q", got, want)
	}
}

func TestSampleCPUReadsThisProcess(t *testing.T) {
	s, err := sampleCPU(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s[benchProcess]; !ok || len(s) != 1 {
		t.Errorf("sample %v, want this process alone", s)
	}
	if _, err := sampleCPU(nil, map[string]int{"none": -1}); err == nil {
		t.Error("a process that does not exist gave no error")
	}
}
