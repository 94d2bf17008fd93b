package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// CurveOptions are a curve's: scale runs at several sizes, then the fits.
type CurveOptions struct {
	// Scale is every run's options; each size overrides its Providers,
	// Pods and Namespaces.
	Scale ScaleOptions
	// Sizes are the runs, each "PROVIDERSxPODS" or
	// "PROVIDERSxPODS/NAMESPACES" (default Scale.Namespaces).
	Sizes []string
	// Predict, when set, is a size the fits are evaluated at.
	Predict string
}

// RunCurve runs a scale run per size, one after the other, and prints the
// fit of each figure over them (and at Predict). A failed run is reported
// and the curve goes on without it.
func RunCurve(ctx context.Context, opts CurveOptions) error {
	predict, err := predictPoint(opts.Predict)
	if err != nil {
		return err
	}
	type size struct{ providers, pods, namespaces int }
	sizes := make([]size, len(opts.Sizes))
	for i, s := range opts.Sizes {
		p, pods, ns, err := parseScaleSize(s, opts.Scale.Namespaces)
		if err != nil {
			return fmt.Errorf("-curve: %w", err)
		}
		sizes[i] = size{p, pods, ns}
	}
	var results bytes.Buffer
	var errs []error
	out := opts.Scale.Out
	for i, s := range sizes {
		run := opts.Scale
		run.Providers, run.Pods, run.Namespaces = s.providers, s.pods, s.namespaces
		run.Out = io.MultiWriter(out, &results)
		fmt.Fprintf(out, "curve run %d of %d: %d providers, %d pods, %d namespaces\n", i+1, len(sizes), s.providers, s.pods, s.namespaces)
		if err := RunScale(ctx, run); err != nil {
			fmt.Fprintf(out, "curve run %s failed: %v\n", opts.Sizes[i], err)
			errs = append(errs, fmt.Errorf("curve run %s: %w", opts.Sizes[i], err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	points, err := parseScaleResults(&results)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	printScaleFits(out, points, predict)
	return errors.Join(errs...)
}

// FitScaleResults prints the fits of the RESULT scale lines in files (the
// outputs of earlier runs), evaluated at predict when set.
func FitScaleResults(out io.Writer, files []string, predict string) error {
	at, err := predictPoint(predict)
	if err != nil {
		return err
	}
	var points []scalePoint
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("-fit: %w", err)
		}
		p, err := parseScaleResults(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("-fit %s: %w", path, err)
		}
		points = append(points, p...)
	}
	if len(points) == 0 {
		return fmt.Errorf("-fit %s: no RESULT scale line", strings.Join(files, ","))
	}
	printScaleFits(out, points, at)
	return nil
}

func predictPoint(s string) (scalePoint, error) {
	if s == "" {
		return nil, nil
	}
	p, pods, ns, err := parseScaleSize(s, 0)
	if err != nil {
		return nil, fmt.Errorf("-predict: %w", err)
	}
	if ns == 0 {
		return nil, fmt.Errorf("-predict %q: give the namespaces too, e.g. 100x100000/1000", s)
	}
	return newScalePoint(p, pods, ns), nil
}
