package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The repository root, from this package's folder.
const repoRoot = "../.."

// TestDocsNameWhatExists reads the code of the README and every page of
// docs/ (fenced blocks and inline code) and fails for each make target,
// capxp command or flag, make dev EXAMPLE and clusterctl flavor they name
// that does not exist.
func TestDocsNameWhatExists(t *testing.T) {
	targets := makeTargets(t)
	helps := commandHelps(t)
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "compositions", "README.md"))
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, page)
		for _, line := range codeLines(string(raw)) {
			for _, problem := range checkLine(line, targets, helps) {
				t.Errorf("%s: %q: %s", name, strings.TrimSpace(line), problem)
			}
		}
	}
}

// TestCheckLine: the docs check finds what does not exist, and only that.
func TestCheckLine(t *testing.T) {
	targets := map[string]bool{"dev": true, "test": true, "test-e2e": true}
	helps := map[string]string{"describe cluster": "-n, --namespace NS --show-conditions -o"}
	cases := map[string]struct {
		line string
		want int
	}{
		"KnownTarget":          {line: "make test-e2e", want: 0},
		"KnownTargetAndVar":    {line: "make dev EXAMPLE=local", want: 0},
		"UnknownTarget":        {line: "make test-everything", want: 1},
		"UnknownExample":       {line: "make dev EXAMPLE=nowhere", want: 1},
		"KnownFlag":            {line: "capxp describe cluster demo -n ns --show-conditions all", want: 0},
		"UnknownFlag":          {line: "bin/capxp describe cluster demo --colour never", want: 1},
		"UnknownCommand":       {line: "capxp inspect cluster demo", want: 1},
		"KnownFlavor":          {line: "clusterctl generate cluster a --flavor local", want: 0},
		"UnknownFlavor":        {line: "clusterctl generate cluster a --flavor metal", want: 1},
		"PlaceholderFlavor":    {line: "clusterctl generate cluster NAME --flavor F", want: 0},
		"Prose":                {line: "make sure it runs", want: 0},
		"TwoTargetsOneUnknown": {line: "make test && make nothing-here", want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := checkLine(tc.line, targets, helps); len(got) != tc.want {
				t.Errorf("checkLine(%q) = %v, want %d problems", tc.line, got, tc.want)
			}
		})
	}
}

var (
	fence      = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	// makeCall is a make command: its targets and variables up to the end
	// of the command.
	makeCall    = regexp.MustCompile(`(?:^|[\s(;&|])make((?:\s+[A-Za-z0-9_.=/,|-]+)+)`)
	capxpCall   = regexp.MustCompile(`(?:^|[\s/(])capxp\s+([a-z-]+)(?:\s+([a-z-]+))?((?:\s+\S+)*)`)
	flavorFlag  = regexp.MustCompile(`--flavor[ =]([A-Za-z0-9-]+)`)
	exampleVar  = regexp.MustCompile(`EXAMPLE=([A-Za-z0-9-]+)`)
	longFlag    = regexp.MustCompile(`(?:^|\s)(--?[a-z][a-z0-9-]*)`)
	commandHead = map[string]bool{"manager": true, "composition": true, "xrd": true, "describe": true, "plan": true, "version": true}
)

// codeLines are the lines of a page's fenced code blocks and its inline
// code spans.
func codeLines(page string) []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(page, -1) {
		out = append(out, strings.Split(m[1], "\n")...)
	}
	rest := fence.ReplaceAllString(page, "")
	for _, m := range inlineCode.FindAllStringSubmatch(rest, -1) {
		out = append(out, m[1])
	}
	return out
}

// checkLine says what a line of code names that does not exist.
func checkLine(line string, targets map[string]bool, helps map[string]string) []string {
	var problems []string
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return nil
	}
	for _, m := range makeCall.FindAllStringSubmatch(line, -1) {
		words := strings.Fields(m[1])
		if len(words) == 0 || strings.Contains(words[0], "=") && len(words) == 1 {
			continue
		}
		named := false
		for _, w := range words {
			if strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
				continue
			}
			if strings.ContainsAny(w, "|&;") || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(w) {
				break
			}
			if !targets[w] {
				// Prose ("make sure"): only the first word of a command
				// in a code block names a target, and only a target-like
				// one.
				if named || !strings.Contains(line, "make "+w) || isProse(w) {
					break
				}
				problems = append(problems, "make has no target "+w)
			}
			named = true
		}
	}
	for _, m := range exampleVar.FindAllStringSubmatch(line, -1) {
		if _, err := os.Stat(filepath.Join(repoRoot, "examples", m[1])); err != nil {
			problems = append(problems, "no example "+m[1]+" (examples/)")
		}
	}
	if strings.Contains(line, "clusterctl generate cluster") {
		for _, m := range flavorFlag.FindAllStringSubmatch(line, -1) {
			if m[1] == strings.ToUpper(m[1]) {
				continue // a placeholder (FLAVOR)
			}
			if _, err := os.Stat(filepath.Join(repoRoot, "packages", "clusterctl", "cluster-template-"+m[1]+".yaml")); err != nil {
				problems = append(problems, "no clusterctl flavor "+m[1]+" (packages/clusterctl/)")
			}
		}
	}
	for _, m := range capxpCall.FindAllStringSubmatch(line, -1) {
		cmd := m[1]
		if !commandHead[cmd] {
			if strings.HasPrefix(line, "capxp") || strings.Contains(line, "/capxp "+cmd) {
				problems = append(problems, "capxp has no command "+cmd)
			}
			continue
		}
		help, ok := helps[cmd+" "+m[2]]
		if !ok {
			help, ok = helps[cmd]
		}
		if !ok {
			continue
		}
		for _, f := range longFlag.FindAllStringSubmatch(m[3], -1) {
			if f[1] == "-h" || f[1] == "--help" || strings.Contains(line, "| "+strings.TrimLeft(f[1], "-")) {
				continue
			}
			if !flagListed(help, f[1]) {
				problems = append(problems, "capxp "+strings.TrimSpace(cmd+" "+m[2])+" has no flag "+f[1])
			}
		}
	}
	return problems
}

// isProse is a word that follows "make" in English.
func isProse(w string) bool {
	switch w {
	case "sure", "it", "the", "a", "them", "that", "this", "up", "one", "every", "each", "no", "its":
		return true
	}
	return false
}

// flagListed: a help text lists a flag, as -name or --name.
func flagListed(help, flag string) bool {
	name := strings.TrimLeft(flag, "-")
	return regexp.MustCompile(`(^|[\s,])--?` + regexp.QuoteMeta(name) + `([\s,=]|$)`).MatchString(help)
}

// makeTargets are the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = true
	}
	return out
}

// commandHelps are the help texts of capxp's commands, by "command sub".
func commandHelps(t *testing.T) map[string]string {
	t.Helper()
	run := func(f func(args []string, stdout, stderr io.Writer) int, args ...string) string {
		var out bytes.Buffer
		f(args, &out, &out)
		return out.String()
	}
	return map[string]string{
		"manager":           run(runManager, "--help"),
		"composition check": run(runComposition, "check", "--help"),
		"xrd adopt":         run(runXRD, "adopt", "--help"),
		"describe cluster":  run(runDescribe, "cluster", "--help"),
		"plan":              run(runPlan, "--help"),
		"version":           "",
	}
}

// TestDocsLinksResolve: every relative link of the README and docs/ names a
// file of the repository, and every #anchor a heading of the page it names.
func TestDocsLinksResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "compositions", "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, page)
		// Neither a fenced block nor a code span holds links: a pattern
		// such as `[a-z]([-a-z]*)` is code.
		text := inlineCode.ReplaceAllString(fence.ReplaceAllString(string(raw), ""), "code")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				rel, err := filepath.Rel(repoRoot, path)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %s leaves the repository", name, target)
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s names no file", name, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !slices.Contains(anchors(t, path), anchor) {
				t.Errorf("%s: link %s names no heading of %s", name, target, filepath.Base(path))
			}
		}
	}
}

// anchors are the anchors GitHub gives a page's headings.
func anchors(t *testing.T, page string) []string {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`).FindAllStringSubmatch(fence.ReplaceAllString(string(raw), ""), -1) {
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ' || r == '-':
				return '-'
			case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, m[1])
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// TestTroubleshootingNamesEveryReason: each reason the bridge writes has a
// row in docs/troubleshooting.md.
func TestTroubleshootingNamesEveryReason(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "apis", "infrastructure", "v1alpha1", "conditions.go"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := regexp.MustCompile(`(?m)^\t\w+Reason\s*=\s*"(\w+)"`).FindAllStringSubmatch(string(src), -1)
	if len(reasons) < 20 {
		t.Fatalf("found %d reasons in conditions.go: the pattern is out of date", len(reasons))
	}
	for _, r := range reasons {
		if !strings.Contains(string(page), "| `"+r[1]+"`") && !strings.Contains(string(page), "`"+r[1]+"` |") {
			t.Errorf("docs/troubleshooting.md has no row for reason %s", r[1])
		}
	}
}
