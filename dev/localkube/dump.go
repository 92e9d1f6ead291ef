package localkube

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
)

// ShutdownStuck reports whether a manager's error says its runnables
// outlived the graceful shutdown period.
func ShutdownStuck(err error) bool {
	return err != nil && strings.Contains(err.Error(), "grace period")
}

// Goroutines returns the stacks of the goroutines labelled
// component=name (pprof.Do), grouped as the goroutine profile groups them.
func Goroutines(name string) string {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return err.Error()
	}
	var out []string
	for _, record := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(record, `"component":"`+name+`"`) {
			out = append(out, record)
		}
	}
	return strings.Join(out, "\n\n")
}

// DumpGoroutines writes every goroutine's stack to a file in the temporary
// folder and returns its path: what a stuck shutdown waits on is still
// there to read.
func DumpGoroutines(name string) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("capxp-goroutines-%s-%d-%d.txt", name, os.Getpid(), time.Now().UnixNano()))
	f, err := os.Create(path)
	if err != nil {
		return "(cannot write goroutines: " + err.Error() + ")"
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return "(cannot write goroutines: " + err.Error() + ")"
	}
	return path
}
