package e2e

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// slowest is how many top-level containers the timing summary lists.
const slowest = 15

// The suite ends with where its time went, per top-level container (an
// Ordered container's BeforeAll counts in its first spec), so that a
// change that makes `make test` slower shows which area grew.
var _ = ReportAfterSuite("time per area", func(r Report) {
	byArea := map[string]time.Duration{}
	specs := map[string]int{}
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt || s.State == types.SpecStateSkipped {
			continue
		}
		area := "(top level)"
		if len(s.ContainerHierarchyTexts) > 0 {
			area = s.ContainerHierarchyTexts[0]
		}
		byArea[area] += s.RunTime
		specs[area]++
	}
	areas := make([]string, 0, len(byArea))
	for a := range byArea {
		areas = append(areas, a)
	}
	slices.SortFunc(areas, func(a, b string) int { return cmp.Compare(byArea[b], byArea[a]) })
	var b strings.Builder
	fmt.Fprintf(&b, "Time per area (top %d of %d, suite %s):\n", min(slowest, len(areas)), len(areas), r.RunTime.Round(time.Second))
	for _, a := range areas[:min(slowest, len(areas))] {
		fmt.Fprintf(&b, "  %7s  %3d specs  %s\n", byArea[a].Round(time.Second), specs[a], a)
	}
	AddReportEntry("time per area", b.String(), ReportEntryVisibilityAlways)
	// make test runs the suite without -v, which hides the report: it
	// names a file to print it from.
	if path := os.Getenv("FERRY_E2E_TIMES"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintf(GinkgoWriter, "write the time per area to %s: %v\n", path, err)
		}
	}
})
