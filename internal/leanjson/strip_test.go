package leanjson

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

const mf = `"managedFields":[{"manager":"crossplane","operation":"Apply","fieldsV1":{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{}}}},"time":"2026-11-23T21:00:00Z"}]`

func TestStripManagedFields(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"Object": {
			reason: "An object's own managed fields go.",
			in:     `{"apiVersion":"v1","kind":"X","metadata":{"name":"a",` + mf + `,"uid":"u"},"spec":{"x":1}}`,
			want:   `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","uid":"u"},"spec":{"x":1}}`,
		},
		"First": {
			reason: "Managed fields first in the metadata take no comma with them that the next member needs.",
			in:     `{"metadata":{` + mf + `,"name":"a"}}`,
			want:   `{"metadata":{"name":"a"}}`,
		},
		"Last": {
			reason: "Managed fields last in the metadata leave no trailing comma.",
			in:     `{"metadata":{"name":"a",` + mf + `}}`,
			want:   `{"metadata":{"name":"a"}}`,
		},
		"Only": {
			reason: "Metadata of managed fields alone is left empty.",
			in:     `{"metadata":{` + mf + `}}`,
			want:   `{"metadata":{}}`,
		},
		"WatchEvent": {
			reason: "A watch event's object loses its managed fields.",
			in:     `{"type":"MODIFIED","object":{"kind":"X","metadata":{"name":"a",` + mf + `}}}`,
			want:   `{"type":"MODIFIED","object":{"kind":"X","metadata":{"name":"a"}}}`,
		},
		"List": {
			reason: "Every item of a list loses its managed fields; the list's metadata has none to lose.",
			in:     `{"kind":"XList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a",` + mf + `}},{"metadata":{` + mf + `,"name":"b"}}]}`,
			want:   `{"kind":"XList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}`,
		},
		"EmptyList": {
			reason: "An empty list is kept.",
			in:     `{"kind":"XList","metadata":{` + mf + `},"items":[]}`,
			want:   `{"kind":"XList","metadata":{},"items":[]}`,
		},
		"Embedded": {
			reason: "Managed fields of an object embedded in a spec (a provider-kubernetes manifest) are kept: they are the spec's.",
			in:     `{"metadata":{"name":"a"},"spec":{"manifest":{"metadata":{` + mf + `}}}}`,
			want:   `{"metadata":{"name":"a"},"spec":{"manifest":{"metadata":{` + mf + `}}}}`,
		},
		"NestedItem": {
			reason: "Only a list's own items are objects: an item's spec is the item's.",
			in:     `{"items":[{"metadata":{` + mf + `},"spec":{"items":[{"metadata":{` + mf + `}}]}}]}`,
			want:   `{"items":[{"metadata":{},"spec":{"items":[{"metadata":{` + mf + `}}]}}]}`,
		},
		"Strings": {
			reason: "Quotes, escapes and brackets in strings do not confuse the scan.",
			in:     `{"metadata":{"annotations":{"a":"\"}]{[\\","managedFields":"x"},` + mf + `,"labels":{"b":"\\\""}}}`,
			want:   `{"metadata":{"annotations":{"a":"\"}]{[\\","managedFields":"x"},"labels":{"b":"\\\""}}}`,
		},
		"WhiteSpace": {
			reason: "Indented JSON is compacted where it is rewritten.",
			in:     "{\n  \"metadata\" : {\n    \"name\": \"a\" ,\n    \"managedFields\": [ {\"manager\": \"m\"} ]\n  },\n  \"spec\": { \"x\": [1, 2] }\n}\n",
			want:   `{"metadata":{"name":"a"},"spec":{ "x": [1, 2] }}`,
		},
		"None": {
			reason: "JSON without managed fields is returned as it is.",
			in:     `{ "metadata": {"name": "a"} }`,
			want:   `{ "metadata": {"name": "a"} }`,
		},
		"Invalid": {
			reason: "JSON that is not valid is returned as it is, for the decoder to report.",
			in:     `{"metadata":{` + mf + `,"name":}`,
			want:   `{"metadata":{` + mf + `,"name":}`,
		},
		"Truncated": {
			reason: "A value cut short is returned as it is.",
			in:     `{"metadata":{"name":"a",` + mf,
			want:   `{"metadata":{"name":"a",` + mf,
		},
		"Trailing": {
			reason: "A value followed by more than white space is returned as it is.",
			in:     `{"metadata":{` + mf + `}} x`,
			want:   `{"metadata":{` + mf + `}} x`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := string(StripManagedFields([]byte(tc.in)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nStripManagedFields(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReader(t *testing.T) {
	events := `{"type":"ADDED","object":{"metadata":{"name":"a",` + mf + `}}}` + "\n" +
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}` + "\n" +
		`{"type":"MODIFIED","object":{"metadata":{` + mf + `,"name":"a"},"status":{"s":"}"}}}` + "\n"
	want := `{"type":"ADDED","object":{"metadata":{"name":"a"}}}` + "\n" +
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}` + "\n" +
		`{"type":"MODIFIED","object":{"metadata":{"name":"a"},"status":{"s":"}"}}}` + "\n"
	cases := map[string]struct {
		reason string
		r      func(string) io.Reader
		want   string
	}{
		"Whole": {
			reason: "A stream read at once loses every event's managed fields.",
			r:      func(s string) io.Reader { return strings.NewReader(s) },
			want:   want,
		},
		"ByteByByte": {
			reason: "Values cut anywhere by the connection are put together first.",
			r:      func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
			want:   want,
		},
		"HalfReads": {
			reason: "Reads of any size give the same stream.",
			r:      func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
			want:   want,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := io.ReadAll(iotest.OneByteReader(NewReader(io.NopCloser(tc.r(events)))))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\nNewReader(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReaderCutShort(t *testing.T) {
	// A connection that breaks inside a value passes what came, and the
	// error, so the decoder reports it.
	in := `{"type":"ADDED","object":{"metadata":{"name":"a"}}}{"type":"MODIFIED","obj`
	r := NewReader(io.NopCloser(iotest.TimeoutReader(strings.NewReader(in))))
	got, err := io.ReadAll(r)
	if err == nil {
		t.Fatal("ReadAll(...): want the connection's error, got none")
	}
	if diff := cmp.Diff(in, string(got)); diff != "" {
		t.Errorf("ReadAll(...): -want, +got:\n%s", diff)
	}
}

func TestRoundTripper(t *testing.T) {
	obj := `{"metadata":{"name":"a",` + mf + `}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("type"))
		if e := r.Header.Get("Accept-Encoding"); e == "x-test" {
			w.Header().Set("Content-Encoding", e)
		}
		_, _ = io.WriteString(w, obj)
	}))
	defer srv.Close()
	c := &http.Client{Transport: RoundTripper(http.DefaultTransport)}
	cases := map[string]struct {
		reason   string
		method   string
		typ      string
		encoding string
		want     string
	}{
		"JSON": {
			reason: "A JSON response to a GET loses its managed fields.",
			method: http.MethodGet, typ: "application/json", want: `{"metadata":{"name":"a"}}`,
		},
		"JSONCharset": {
			reason: "Media type parameters do not matter.",
			method: http.MethodGet, typ: "application/json;charset=utf-8", want: `{"metadata":{"name":"a"}}`,
		},
		"Patch": {
			reason: "What a write returns is left as it is.",
			method: http.MethodPatch, typ: "application/json", want: obj,
		},
		"Encoded": {
			reason: "A body still in its content encoding is left as it is.",
			method: http.MethodGet, typ: "application/json", encoding: "x-test", want: obj,
		},
		"OtherType": {
			reason: "Other media types (protobuf, CBOR) are left as they are.",
			method: http.MethodGet, typ: "application/vnd.kubernetes.protobuf", want: obj,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+"?type="+url.QueryEscape(tc.typ), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.encoding != "" {
				req.Header.Set("Accept-Encoding", tc.encoding)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\nbody: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRoundTripperWraps(t *testing.T) {
	// client-go's helpers find the transport underneath through
	// utilnet.RoundTripperWrapper (closing idle connections, for one).
	inner := &http.Transport{}
	w, ok := RoundTripper(inner).(utilnet.RoundTripperWrapper)
	if !ok || w.WrappedRoundTripper() != inner {
		t.Errorf("RoundTripper(...) does not say what it wraps")
	}
}

// FuzzStripManagedFields checks the stripped JSON against the JSON decoded,
// its objects' managed fields deleted: the same values, and nothing else
// changed. Of what does not decode it only asks that it does not panic:
// the API server sends valid JSON, and what is cut short comes back as it
// was (TestStripManagedFields).
func FuzzStripManagedFields(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"name":"a",` + mf + `}}`,
		`{"type":"ADDED","object":{"metadata":{` + mf + `}}}`,
		`{"items":[{"metadata":{` + mf + `}},{"metadata":{}}]}`,
		`{"spec":{"metadata":{` + mf + `}}}`,
		`[1,{"metadata":{` + mf + `}}]`,
		`{"metadata":{"managedFields":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got := StripManagedFields(in)
		var v any
		if err := json.Unmarshal(in, &v); err != nil {
			return
		}
		var gotV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("StripManagedFields(%q) = %q, which does not decode: %v", in, got, err)
		}
		if diff := cmp.Diff(deleteManagedFields(v), gotV); diff != "" {
			t.Fatalf("StripManagedFields(%q): -want, +got:\n%s", in, diff)
		}
	})
}

// deleteManagedFields deletes what StripManagedFields strips from a decoded
// value.
func deleteManagedFields(v any) any {
	root, ok := v.(map[string]any)
	if !ok {
		return v
	}
	strip := func(o any) {
		if o, ok := o.(map[string]any); ok {
			if md, ok := o["metadata"].(map[string]any); ok {
				delete(md, "managedFields")
			}
		}
	}
	strip(root)
	strip(root["object"])
	if items, ok := root["items"].([]any); ok {
		for _, it := range items {
			strip(it)
		}
	}
	return root
}
