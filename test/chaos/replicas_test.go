package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// The replicas' leader election, as shipped (the manager's defaults).
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// TestLeaderTakeover runs two replicas with leader election. It stops the
// leader as a rolling update would, and finds the other leading within
// three retry periods (its next try, with client-go's jitter), far from the
// lease's expiry: the leader released the lease. It starts a new replica, then
// kills the leader outright while a fleet provisions, and finds the other
// leading within the lease (plus the retry periods it polls at: to see the
// last renewal, and to take the lease, with client-go's jitter), the fleet
// converged, and no write made twice for the same change: the API server's
// audit log holds no two successive writes by the manager of one object
// with the same request.
func TestLeaderTakeover(t *testing.T) {
	ctx := t.Context()
	since := time.Now()
	// The plane's own manager runs without leader election: the replicas
	// replace it for this test.
	p.KillManager()
	t.Cleanup(func() {
		if err := p.RestartManager(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("cannot restart the plane's manager: %v", err)
		}
	})
	args := []string{"--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=" + leaseDuration.String(), "--leader-elect-retry-period=" + retryPeriod.String()}
	replicas := make([]*plane.Manager, 2)
	var err error
	for i := range replicas {
		if replicas[i], err = p.StartManager(ctx, fmt.Sprintf("capxp-replica-%d", i), args...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(replicas[i].Kill)
	}
	var leader int
	eventually(t, "one replica leads", leaseDuration+2*retryPeriod, func() error {
		var err error
		leader, err = leading(ctx, replicas)
		return err
	})

	// A rolling update stops the leader as Kubernetes stops a pod: it
	// releases the lease as it exits, and the other replica takes it at
	// its next retry, without waiting for the lease to expire.
	follower := 1 - leader
	replicas[leader].Stop()
	stopped := time.Now()
	took := leads(ctx, t, replicas[follower], follower, stopped, 3*retryPeriod)
	t.Logf("replica %d took over %s after the leader, replica %d, stopped (lease %s, retry period %s)", follower, took, leader, leaseDuration, retryPeriod)
	if replicas[leader], err = p.StartManager(ctx, "capxp-replica-2", args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replicas[leader].Kill)
	leader, follower = follower, leader

	fleet := []string{"ha-1", "ha-2", "ha-3"}
	if err := applyFleet(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	eventually(t, "provisioning is under way", time.Minute, func() error {
		if c, err := take(ctx); err != nil || c.Nodes == 0 {
			return fmt.Errorf("no machine provisioned yet (%v)", err)
		}
		return nil
	})
	c, _ := take(ctx)
	replicas[leader].Kill()
	killed := time.Now()
	t.Logf("killed the leader, replica %d, with %s", leader, c)
	// Killed outright, the leader releases nothing: the other replica sees
	// the lease unrenewed for its duration, counted from when it last saw it
	// change, and takes it at its next retry. It tries every retry period
	// plus client-go's jitter of up to 1.2 periods: it sees the last renewal
	// up to 2.2 periods after it, and takes the expired lease up to 2.2
	// periods after the expiry.
	took = leads(ctx, t, replicas[follower], follower, killed, leaseDuration+5*retryPeriod)
	t.Logf("replica %d took over %s after the kill (lease %s, retry period %s)", follower, took, leaseDuration, retryPeriod)
	eventually(t, "the fleet converges, nothing orphaned or duplicated", 3*time.Minute, func() error {
		return converged(ctx, fleet, 0)
	})
	responsive(ctx, t)

	writes, twice, err := repeatedWrites(p.ManagementAuditLog(), since)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the manager made %d writes; %d repeated the previous write of the same object", writes, len(twice))
	for _, w := range twice {
		t.Errorf("written twice for the same change: %s", w)
	}

	deleteAll(ctx, t, fleet)
}

// leads waits until replica i reports itself leader, failing t unless it
// does within bound of since; it returns how long after since it did.
func leads(ctx context.Context, t *testing.T, m *plane.Manager, i int, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	for {
		if now, err := leading(ctx, []*plane.Manager{m}); err == nil && now == 0 {
			return time.Since(since).Round(100 * time.Millisecond)
		}
		if time.Since(since) > bound {
			t.Fatalf("replica %d did not lead %s after the leader went (lease %s, retry period %s)", i, bound, leaseDuration, retryPeriod)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// leading returns the replica that reports itself leader in its metrics,
// and fails unless exactly one does.
func leading(ctx context.Context, replicas []*plane.Manager) (int, error) {
	leaders := []int{}
	for i, m := range replicas {
		v, err := leaderStatus(ctx, m.MetricsURL)
		if err != nil {
			return 0, err
		}
		if v == 1 {
			leaders = append(leaders, i)
		}
	}
	if len(leaders) != 1 {
		return 0, fmt.Errorf("replicas %v lead, want exactly one", leaders)
	}
	return leaders[0], nil
}

// leaderStatus reads client-go's leader_election_master_status gauge.
func leaderStatus(ctx context.Context, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer rsp.Body.Close()
	raw, err := io.ReadAll(rsp.Body)
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(l, "leader_election_master_status{") {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v); err != nil {
				return 0, err
			}
			return v, nil
		}
	}
	return 0, nil
}

// auditEvent is what the repeated-write check reads of an audit event.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource, Namespace, Name, Subresource, APIGroup string
	} `json:"objectRef"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage     string    `json:"stage"`
	Timestamp time.Time `json:"requestReceivedTimestamp"`
}

// repeatedWrites reads the audit log from since: how many successful writes
// the manager (user agent capxp/...) made to objects, and those that sent
// the very request of the previous write to the same object, with no write
// by anyone in between. Leases (leader election) and Events are not
// objects' changes and are left out.
func repeatedWrites(path string, since time.Time) (int, []string, error) {
	f, err := localkube.OpenAuditLog(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	type write struct {
		manager bool
		request string
	}
	last := map[string]write{}
	writes := 0
	var twice []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return 0, nil, err
		}
		r := e.ObjectRef
		if e.Stage != "ResponseComplete" || e.Timestamp.Before(since) || e.ResponseStatus.Code >= 300 ||
			r.Resource == "leases" || r.Resource == "events" || r.Name == "" {
			continue
		}
		key := fmt.Sprintf("%s.%s %s/%s", r.Resource, r.APIGroup, r.Namespace, r.Name)
		if r.Subresource != "" {
			key += " (" + r.Subresource + ")"
		}
		manager := strings.HasPrefix(e.UserAgent, "capxp/")
		var compact bytes.Buffer
		_ = json.Compact(&compact, e.RequestObject)
		w := write{manager: manager, request: e.Verb + " " + compact.String()}
		if manager {
			writes++
			if prev, ok := last[key]; ok && prev.manager && prev.request == w.request && compact.Len() > 0 {
				twice = append(twice, key)
			}
		}
		last[key] = w
	}
	return writes, twice, s.Err()
}
