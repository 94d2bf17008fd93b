package offload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// scalePoint is one scale run's figures, read from its RESULT scale line:
// every key whose value is a number, and pods_per_provider.
type scalePoint map[string]float64

const scaleResultPrefix = "RESULT scale "

// parseScaleResults reads the RESULT scale lines of bench-offload-scale
// outputs (other lines are skipped): one point per line.
func parseScaleResults(r io.Reader) ([]scalePoint, error) {
	var points []scalePoint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), scaleResultPrefix)
		if !ok {
			continue
		}
		p := scalePoint{}
		for field := range strings.FieldsSeq(rest) {
			key, value, ok := strings.Cut(field, "=")
			if !ok {
				return nil, fmt.Errorf("RESULT scale line %q: field %q is not key=value", rest, field)
			}
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				p[key] = v
			}
		}
		for _, key := range []string{"pods", "providers", "namespaces"} {
			if _, ok := p[key]; !ok {
				return nil, fmt.Errorf("RESULT scale line %q: no %s=", rest, key)
			}
		}
		p["pods_per_provider"] = p["pods"] / max(1, p["providers"])
		points = append(points, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read RESULT lines: %w", err)
	}
	return points, nil
}

// scaleFit is a figure fitted by least squares as an affine function of
// some of the run's dimensions (pods, providers, namespaces).
type scaleFit struct {
	Figure    string
	Intercept float64
	// Slopes are the figure's growth per unit of each dimension kept.
	Slopes map[string]float64
	// Kept are the dimensions fitted, in the order asked.
	Kept []string
	// LeftOut says why each dimension asked for was not fitted: constant
	// over the points, or not told apart from the others by them.
	LeftOut map[string]string
	Points  int
	// R2 is the share of the figure's variance the fit explains (1 when
	// the figure does not vary).
	R2 float64
}

// errTooFewPoints is fitScale's error when not even the mean can be fitted.
var errTooFewPoints = errors.New("no point has the figure and every dimension")

// fitScale fits figure y over the points that have it as
// y = a + Σ b_x·x for the dimensions xs: dimensions constant over the
// points, and then the last ones while the points cannot tell them apart
// (as many points as unknowns, at least, and full rank), are left out.
func fitScale(points []scalePoint, y string, xs []string) (scaleFit, error) {
	f := scaleFit{Figure: y, Slopes: map[string]float64{}, LeftOut: map[string]string{}}
	var use []scalePoint
	for _, p := range points {
		ok := true
		for _, k := range append([]string{y}, xs...) {
			_, has := p[k]
			ok = ok && has
		}
		if ok {
			use = append(use, p)
		}
	}
	if len(use) == 0 {
		return f, fmt.Errorf("fit %s: %w", y, errTooFewPoints)
	}
	f.Points = len(use)
	for _, x := range xs {
		if slices.ContainsFunc(use, func(p scalePoint) bool { return p[x] != use[0][x] }) {
			f.Kept = append(f.Kept, x)
		} else {
			f.LeftOut[x] = "constant"
		}
	}
	for {
		if len(use) < len(f.Kept)+1 {
			last := f.Kept[len(f.Kept)-1]
			f.Kept, f.LeftOut[last] = f.Kept[:len(f.Kept)-1], "too few points"
			continue
		}
		coef, err := leastSquares(use, y, f.Kept)
		var cond mat.Condition
		if errors.As(err, &cond) && len(f.Kept) > 0 {
			last := f.Kept[len(f.Kept)-1]
			f.Kept, f.LeftOut[last] = f.Kept[:len(f.Kept)-1], "not independent of the others over these points"
			continue
		}
		if err != nil {
			return f, fmt.Errorf("fit %s: %w", y, err)
		}
		f.Intercept = coef[0]
		for i, x := range f.Kept {
			f.Slopes[x] = coef[i+1]
		}
		break
	}
	var mean, total, residual float64
	for _, p := range use {
		mean += p[y] / float64(len(use))
	}
	for _, p := range use {
		total += (p[y] - mean) * (p[y] - mean)
		d := p[y] - f.At(p)
		residual += d * d
	}
	f.R2 = 1
	if total > 0 {
		f.R2 = 1 - residual/total
	}
	return f, nil
}

// leastSquares solves y ≈ c0 + Σ c_i·x_i over the points.
func leastSquares(points []scalePoint, y string, xs []string) ([]float64, error) {
	a := mat.NewDense(len(points), len(xs)+1, nil)
	b := mat.NewDense(len(points), 1, nil)
	for i, p := range points {
		a.Set(i, 0, 1)
		for j, x := range xs {
			a.Set(i, j+1, p[x])
		}
		b.Set(i, 0, p[y])
	}
	var c mat.Dense
	if err := c.Solve(a, b); err != nil {
		return nil, err
	}
	out := make([]float64, len(xs)+1)
	for i := range out {
		out[i] = c.At(i, 0)
	}
	return out, nil
}

// At is the fitted figure at point p.
func (f scaleFit) At(p scalePoint) float64 {
	v := f.Intercept
	for _, x := range f.Kept {
		v += f.Slopes[x] * p[x]
	}
	return v
}

// String renders the fit, e.g. "vk_rss_mib = 40.1 + 0.0213/pods_per_provider
// (4 points, r²=0.99; left out: namespaces (constant))".
func (f scaleFit) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s = %.4g", f.Figure, f.Intercept)
	for _, x := range f.Kept {
		fmt.Fprintf(&b, " %+.4g per %s", f.Slopes[x], dimensionUnit(x))
	}
	fmt.Fprintf(&b, " (%d points, r²=%.3f", f.Points, f.R2)
	if len(f.LeftOut) > 0 {
		var parts []string
		for _, x := range slices.Sorted(mapKeys(f.LeftOut)) {
			parts = append(parts, fmt.Sprintf("%s: %s", x, f.LeftOut[x]))
		}
		fmt.Fprintf(&b, "; left out: %s", strings.Join(parts, ", "))
	}
	b.WriteString(")")
	return b.String()
}

// dimensionUnit names one unit of a dimension: "pod", "pod of its provider".
func dimensionUnit(x string) string {
	if x == "pods_per_provider" {
		return "pod of its provider"
	}
	return strings.TrimSuffix(x, "s")
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// scaleFitSpecs are the figures of the curve and what each is fitted over:
// a virtual kubelet and a provider hold their own provider's pods
// (pods_per_provider), the consumer all of them.
var scaleFitSpecs = []struct {
	figure string
	over   []string
}{
	{"offload_s", []string{"pods", "providers", "namespaces"}},
	{"time_ratio", []string{"pods", "providers", "namespaces"}},
	{"vk_rss_mib", []string{"pods_per_provider", "namespaces"}},
	{"vk_cpu_cores", []string{"pods_per_provider", "namespaces"}},
	{"cm_consumer_rss_mib", []string{"pods", "providers", "namespaces"}},
	{"cm_consumer_cpu_cores", []string{"pods", "providers", "namespaces"}},
	{"cm_provider_rss_mib", []string{"pods_per_provider", "namespaces"}},
	{"cm_provider_cpu_cores", []string{"pods_per_provider", "namespaces"}},
	{"requests_per_pod", []string{"pods", "providers", "namespaces"}},
	{"open_watches_consumer", []string{"providers", "namespaces", "pods"}},
	{"open_watches_provider", []string{"namespaces", "pods_per_provider"}},
	{"etcd_objects_per_pod_consumer", []string{"pods", "providers", "namespaces"}},
	{"etcd_bytes_per_pod_consumer", []string{"pods", "providers", "namespaces"}},
	{"etcd_objects_per_pod_provider", []string{"pods_per_provider", "namespaces"}},
	{"etcd_bytes_per_pod_provider", []string{"pods_per_provider", "namespaces"}},
}

// printScaleFits fits every figure of scaleFitSpecs that the points have
// and prints each fit, with its value at predict when given.
func printScaleFits(w io.Writer, points []scalePoint, predict scalePoint) {
	fmt.Fprintf(w, "fits over %d scale runs (least squares; the figure's growth per pod, provider, namespace):\n", len(points))
	for _, s := range scaleFitSpecs {
		f, err := fitScale(points, s.figure, s.over)
		if errors.Is(err, errTooFewPoints) {
			continue
		}
		if err != nil {
			fmt.Fprintf(w, "fit %s: %v\n", s.figure, err)
			continue
		}
		line := "fit " + f.String()
		if predict != nil {
			line += fmt.Sprintf("; at %s: %.4g", predict, f.At(predict))
		}
		fmt.Fprintln(w, line)
	}
}

// String renders a prediction point as providers×pods/namespaces.
func (p scalePoint) String() string {
	return fmt.Sprintf("%g providers × %g pods over %g namespaces", p["providers"], p["pods"], p["namespaces"])
}

// parseScaleSize reads "PROVIDERSxPODS" or "PROVIDERSxPODS/NAMESPACES"
// (namespaces defaulting to namespaces), e.g. "10x10000/100".
func parseScaleSize(s string, namespaces int) (providers, pods, ns int, err error) {
	size, nsText, hasNS := strings.Cut(strings.TrimSpace(s), "/")
	pText, podsText, ok := strings.Cut(size, "x")
	if !ok {
		return 0, 0, 0, fmt.Errorf("%q: want PROVIDERSxPODS[/NAMESPACES], e.g. 10x10000/100", s)
	}
	if providers, err = strconv.Atoi(pText); err != nil || providers < 1 {
		return 0, 0, 0, fmt.Errorf("%q: providers %q: want a number from 1", s, pText)
	}
	if pods, err = strconv.Atoi(podsText); err != nil || pods < 1 {
		return 0, 0, 0, fmt.Errorf("%q: pods %q: want a number from 1", s, podsText)
	}
	ns = namespaces
	if hasNS {
		if ns, err = strconv.Atoi(nsText); err != nil || ns < 1 {
			return 0, 0, 0, fmt.Errorf("%q: namespaces %q: want a number from 1", s, nsText)
		}
	}
	return providers, pods, ns, nil
}

// newScalePoint is the point of a size, for predictions.
func newScalePoint(providers, pods, namespaces int) scalePoint {
	return scalePoint{"providers": float64(providers), "pods": float64(pods), "namespaces": float64(namespaces),
		"pods_per_provider": float64(pods) / float64(providers)}
}
