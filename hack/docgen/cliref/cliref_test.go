package cliref

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", Short: "A tool", Version: "v1.2.3 (commit abc, built today)"}
	peer := &cobra.Command{Use: "peer", Short: "Peer two things", Run: func(*cobra.Command, []string) {}}
	peer.Flags().Duration("timeout", 0, "give up after this long")
	move := &cobra.Command{Use: "move", Short: "Move things"}
	move.AddCommand(&cobra.Command{Use: "volume", Short: "Move a volume", Run: func(*cobra.Command, []string) {}})
	root.AddCommand(peer, move, &cobra.Command{Use: "secret", Hidden: true, Run: func(*cobra.Command, []string) {}})
	return root
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	pages, err := Write(tree(), dir, "<!-- generated -->\n\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tool.md", "tool_completion.md", "tool_completion_bash.md", "tool_completion_fish.md", "tool_completion_powershell.md",
		"tool_completion_zsh.md", "tool_move.md", "tool_move_volume.md", "tool_peer.md"}
	if !slices.Equal(pages, want) {
		t.Errorf("pages %q, want %q", pages, want)
	}
	root, err := os.ReadFile(filepath.Join(dir, "tool.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!-- generated -->\n\n## tool\n", "--version", "[tool peer](tool_peer.md)"} {
		if !strings.Contains(string(root), want) {
			t.Errorf("tool.md lacks %q:\n%s", want, root)
		}
	}
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		// The version string and cobra's dated footer would change the
		// pages with every build and every day.
		if strings.Contains(string(b), "Auto generated") || strings.Contains(string(b), "v1.2.3") {
			t.Errorf("%s holds the date or the build's version:\n%s", p, b)
		}
	}
	peer, _ := os.ReadFile(filepath.Join(dir, "tool_peer.md"))
	if !strings.Contains(string(peer), "--timeout duration") {
		t.Errorf("tool_peer.md lacks its flag:\n%s", peer)
	}
}
