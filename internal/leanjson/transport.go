package leanjson

import (
	"io"
	"mime"
	"net/http"
)

// readSize is how much of a response is read at once.
const readSize = 32 << 10

// RoundTripper returns rt with the managed fields removed from every JSON
// response to a GET (a get, a list, a watch) before the caller reads it. A
// response to any other request, of another media type, or with a content
// encoding, is left as it is.
func RoundTripper(rt http.RoundTripper) http.RoundTripper {
	return &roundTripper{rt: rt}
}

type roundTripper struct{ rt http.RoundTripper }

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	// A body still encoded (a caller that asked for gzip itself gets it as
	// sent) is not JSON yet.
	if !isJSON(resp.Header.Get("Content-Type")) || resp.Header.Get("Content-Encoding") != "" {
		return resp, nil
	}
	resp.Body = NewReader(resp.Body)
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// WrappedRoundTripper lets client-go's helpers (closing idle connections,
// debugging wrappers) reach the transport underneath.
func (t *roundTripper) WrappedRoundTripper() http.RoundTripper { return t.rt }

// isJSON reports whether a Content-Type is JSON; one that does not parse is
// not.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// NewReader returns a reader of r's JSON values (one, or a stream of watch
// events) without their objects' managed fields. A value is passed on once
// it is whole; what is not a JSON object or array passes as it is.
func NewReader(r io.ReadCloser) io.ReadCloser {
	return &reader{r: r, buf: make([]byte, readSize)}
}

type reader struct {
	r   io.ReadCloser
	buf []byte
	err error

	// out is what is ready to be read.
	out []byte
	// value is the value being read; depth its nesting, inString and
	// escaped where its scan is.
	value    []byte
	depth    int
	inString bool
	escaped  bool
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			// What is left of a value cut short goes as it is: decoding
			// it says so.
			if len(r.value) > 0 {
				r.out, r.value = r.value, nil
				break
			}
			return 0, r.err
		}
		n, err := r.r.Read(r.buf)
		r.scan(r.buf[:n])
		r.err = err
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	if len(r.out) == 0 {
		r.out = r.out[:0:0]
	}
	return n, nil
}

// scan moves whole values from b to out, without their managed fields, and
// keeps the rest of a value in value.
func (r *reader) scan(b []byte) {
	for len(b) > 0 {
		if r.depth == 0 {
			// Between values: pass everything up to the next one.
			i := 0
			for i < len(b) && b[i] != '{' && b[i] != '[' {
				i++
			}
			r.out = append(r.out, b[:i]...)
			b = b[i:]
		}
		end := r.valueEnd(b)
		if end < 0 {
			r.value = append(r.value, b...)
			return
		}
		r.value = append(r.value, b[:end]...)
		r.out = append(r.out, StripManagedFields(r.value)...)
		r.value = r.value[:0]
		b = b[end:]
	}
}

// valueEnd scans b, which goes on the value being read, and returns where
// in b that value ends; -1 when it goes on after b.
func (r *reader) valueEnd(b []byte) int {
	for i, c := range b {
		switch {
		case r.inString:
			switch {
			case r.escaped:
				r.escaped = false
			case c == '\\':
				r.escaped = true
			case c == '"':
				r.inString = false
			}
		case c == '"':
			r.inString = true
		case c == '{' || c == '[':
			r.depth++
		case c == '}' || c == ']':
			r.depth--
			if r.depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

func (r *reader) Close() error { return r.r.Close() }
