package plane

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// userHz is the unit of the kernel's process CPU counters (USER_HZ).
const userHz = 100

// ProcessStat is what the kernel's process table says of a process: its
// command name, parent and the CPU time it used so far.
type ProcessStat struct {
	Name   string
	Parent int
	CPU    time.Duration
}

// ReadProcessStat reads /proc/PID/stat (Linux).
func ReadProcessStat(pid int) (ProcessStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcessStat{}, errors.Wrapf(err, "cannot read the process table entry of %d", pid)
	}
	s := string(b)
	// The command name is in parentheses and may hold spaces.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return ProcessStat{}, errors.Errorf("cannot parse the process table entry of %d", pid)
	}
	// After the name: state, ppid, ... utime and stime (fields 14 and 15
	// of the line, 12 and 13 here).
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return ProcessStat{}, errors.Errorf("cannot parse the process table entry of %d", pid)
	}
	parent, _ := strconv.Atoi(f[1])
	user, _ := strconv.ParseInt(f[11], 10, 64)
	system, _ := strconv.ParseInt(f[12], 10, 64)
	return ProcessStat{Name: s[open+1 : end], Parent: parent, CPU: time.Duration(user+system) * time.Second / userHz}, nil
}

// ChildrenCPU sums the CPU time of the running children of process parent
// by command name.
func ChildrenCPU(parent int) map[string]time.Duration {
	out := map[string]time.Duration{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := ReadProcessStat(pid)
		if err != nil || st.Parent != parent {
			continue
		}
		out[st.Name] += st.CPU
	}
	return out
}

// CPU returns the CPU time the plane's component processes (the manager,
// Crossplane and its functions, provider-kubernetes,
// kube-controller-manager) used so far, by component.
func (p *Plane) CPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	procs := append([]*process{}, p.procs...)
	if p.xp != nil {
		procs = append(procs, p.xp.procs...)
	}
	if p.manager != nil {
		procs = append(procs, p.manager)
	}
	for _, proc := range procs {
		if proc.cmd.Process == nil {
			continue
		}
		if st, err := ReadProcessStat(proc.cmd.Process.Pid); err == nil {
			out[proc.name] += st.CPU
		}
	}
	return out
}

// MachineCPU is what the kernel counted of the whole machine's CPU time, all
// cores together: busy (in any process or the kernel), idle (waiting for
// input and output included) and stolen (the hypervisor ran something else
// while a core of this machine wanted to run).
type MachineCPU struct {
	Busy, Idle, Stolen time.Duration
}

// Sub is what m counted since before.
func (m MachineCPU) Sub(before MachineCPU) MachineCPU {
	return MachineCPU{Busy: m.Busy - before.Busy, Idle: m.Idle - before.Idle, Stolen: m.Stolen - before.Stolen}
}

// ReadMachineCPU reads the machine's CPU counters from /proc/stat (Linux).
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, errors.Wrap(err, "cannot read the machine's CPU counters")
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineCPU(line)
}

// parseMachineCPU parses the first line of /proc/stat: "cpu" then user,
// nice, system, idle, iowait, irq, softirq and steal, in USER_HZ (guest time
// is counted in user already, and left out).
func parseMachineCPU(line string) (MachineCPU, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineCPU{}, errors.Errorf("cannot parse the machine's CPU counters %q", line)
	}
	var ticks [8]int64
	for i := range ticks {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return MachineCPU{}, errors.Wrapf(err, "cannot parse the machine's CPU counters %q", line)
		}
		ticks[i] = n
	}
	d := func(t int64) time.Duration { return time.Duration(t) * time.Second / userHz }
	user, nice, system, idle, iowait, irq, softirq, steal := ticks[0], ticks[1], ticks[2], ticks[3], ticks[4], ticks[5], ticks[6], ticks[7]
	return MachineCPU{Busy: d(user + nice + system + irq + softirq), Idle: d(idle + iowait), Stolen: d(steal)}, nil
}
