package framework

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestShellSteps(t *testing.T) {
	good := strings.Join([]string{
		"# Example",
		"```yaml",
		"# kubectl apply -f not-a-step.yaml",
		"```",
		"",
		"```sh",
		"kubectl apply -f examples/x/namespace.yaml",
		"# a comment line",
		"",
		"kubectl wait --for=condition=Ready nsoff/offloading -n x --timeout=2m   # waits",
		"```",
		"",
		RunByMarker,
		"",
		"*Illustrative:* not run",
		"```sh",
		"kubectl delete -f examples/x/",
		"```",
		"",
		"```sh",
		"$ kubectl scale deployment w -n x --replicas=8",
		"```",
		RunByMarker,
	}, "\n")
	steps, err := ShellSteps(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	want := [][][]string{
		{{"apply", "-f", "examples/x/namespace.yaml"}, {"wait", "--for=condition=Ready", "nsoff/offloading", "-n", "x", "--timeout=2m"}},
		{{"scale", "deployment", "w", "-n", "x", "--replicas=8"}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("steps:\n got %q\nwant %q", steps, want)
	}

	for name, bad := range map[string]string{
		"not kubectl":      "```sh\nhelm install x\n```\n" + RunByMarker,
		"quotes":           "```sh\nkubectl label pod p 'a=b'\n```\n" + RunByMarker,
		"pipe":             "```sh\nkubectl get pods | grep x\n```\n" + RunByMarker,
		"empty":            "```sh\n# nothing\n```\n" + RunByMarker,
		"marker, no block": "Some text.\n" + RunByMarker,
		"after yaml":       "```yaml\nkind: Pod\n```\n" + RunByMarker,
		"unclosed":         "```sh\nkubectl get pods\n",
	} {
		if steps, err := ShellSteps(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: no error, steps %q", name, steps)
		}
	}
}

// TestExampleSteps parses the README of every example (what the examples
// e2e spec runs) and checks each file or folder its commands apply exists,
// so a renamed manifest fails here, without clusters.
func TestExampleSteps(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	readmes, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(readmes) == 0 {
		t.Fatal("no examples/*/README.md")
	}
	for _, readme := range readmes {
		f, err := os.Open(readme)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := ShellSteps(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", readme, err)
			continue
		}
		if len(steps) == 0 {
			t.Errorf("%s: no block marked %s", readme, RunByMarker)
		}
		for _, step := range steps {
			for _, args := range step {
				for i, a := range args {
					if a == "-f" && i+1 < len(args) {
						if _, err := os.Stat(filepath.Join(root, args[i+1])); err != nil {
							t.Errorf("%s: kubectl %s: %v", readme, strings.Join(args, " "), err)
						}
					}
				}
			}
		}
	}
}
