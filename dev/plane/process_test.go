package plane

import "testing"

// TestFreePortAvoidsTheEphemeralRange: ports the plane's components listen
// on never come from the range the kernel takes outgoing connections' local
// ports from, and one process never gets the same port twice.
func TestFreePortAvoidsTheEphemeralRange(t *testing.T) {
	low, high := portRange()
	seen := map[int]bool{}
	for range 200 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < low || port >= high {
			t.Fatalf("freePort() = %d, want in [%d, %d)", port, low, high)
		}
		if seen[port] {
			t.Fatalf("freePort() handed out %d twice", port)
		}
		seen[port] = true
	}
}
