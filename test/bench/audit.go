package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
)

// auditEvent is what the counts read of one API server audit event.
type auditEvent struct {
	Verb       string `json:"verb"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	ObjectRef  struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	UserAgent      string `json:"userAgent"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// xrWrites are the writes of one machine XR, in the order the API server
// answered them.
type xrWrites []string

// machineXRWrites reads the management API server's audit log: for every
// machine XR, who wrote it, in order ("crossplane status apply",
// "bridge spec", ...), conflicts included as "... conflict".
func machineXRWrites(path string) (map[string]xrWrites, error) {
	f, err := localkube.OpenAuditLog(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]xrWrites{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 64<<20)
	for s.Scan() {
		var e auditEvent
		if json.Unmarshal(s.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.ObjectRef.Resource != "crossplanemachines" || e.ObjectRef.Name == "" {
			continue
		}
		if e.Verb != "update" && e.Verb != "patch" {
			continue
		}
		w := writer(e) + " " + map[bool]string{true: "status", false: "spec"}[e.ObjectRef.Subresource == "status"]
		if e.ResponseStatus.Code == 409 {
			w += " conflict"
		}
		out[e.ObjectRef.Name] = append(out[e.ObjectRef.Name], w)
	}
	return out, s.Err()
}

// writer names who wrote, by the program in its user agent (every
// component of the plane has the same credentials); Crossplane's server-side
// apply of the composed status by its field manager.
func writer(e auditEvent) string {
	if u, err := url.Parse(e.RequestURI); err == nil && u.Query().Get("fieldManager") == "apiextensions.crossplane.io/composite" {
		return "crossplane-apply"
	}
	program, _, _ := strings.Cut(e.UserAgent, "/")
	switch program {
	case "capxp":
		return "bridge"
	case "":
		return "unknown"
	}
	return program
}

// auditReport counts, per machine XR, Crossplane's status writes before
// and after the bridge's last write of the XR, and what each writer did.
func auditReport(writes map[string]xrWrites) string {
	var before, after []int
	totals := map[string]int{}
	for _, ws := range writes {
		last := -1
		for i, w := range ws {
			totals[w]++
			if strings.HasPrefix(w, "bridge ") {
				last = i
			}
		}
		b, a := 0, 0
		for i, w := range ws {
			if strings.HasPrefix(w, "crossplane") && strings.Contains(w, " status") {
				if i < last {
					b++
				} else {
					a++
				}
			}
		}
		before, after = append(before, b), append(after, a)
	}
	if len(before) == 0 {
		return "the audit log holds no writes of machine XRs\n"
	}
	median := func(v []int) int { slices.Sort(v); return v[len(v)/2] }
	var kinds []string
	for k := range totals {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%.1f", k, float64(totals[k])/float64(len(writes))))
	}
	return fmt.Sprintf("audit log, %d machine XRs: Crossplane's status writes per XR before the bridge's last write, median %d; after it, median %d (max %d)\n"+
		"audit log, writes per machine XR by writer: %s\n",
		len(writes), median(before), median(after), slices.Max(after), strings.Join(parts, " "))
}
