package leanjson

import "bytes"

var keyManagedFields = []byte(`"managedFields"`)

// level is where a JSON value sits in an API server response.
type level int

const (
	// levelVerbatim is a value copied as it is.
	levelVerbatim level = iota
	// levelRoot is the response: an object, a watch event or a list.
	levelRoot
	// levelObject is a watch event's object or a list's item.
	levelObject
	// levelItems is a list's items.
	levelItems
	// levelMetadata is an object's metadata, whose managed fields go.
	levelMetadata
)

// child is the level of the value of member key in an object at l.
func (l level) child(key []byte) level {
	switch {
	case (l == levelRoot || l == levelObject) && string(key) == "metadata":
		return levelMetadata
	case l == levelRoot && string(key) == "object":
		return levelObject
	case l == levelRoot && string(key) == "items":
		return levelItems
	}
	return levelVerbatim
}

// StripManagedFields returns one JSON value of an API server response (an
// object, a list or a watch event) without its objects' managed fields,
// compacted where it changed. A value that holds none, or that cannot be
// scanned (cut short, not JSON), is returned as it is: decoding it says what
// is wrong. The values of the members it drops are scanned, not checked.
func StripManagedFields(in []byte) []byte {
	if !bytes.Contains(in, keyManagedFields) {
		return in
	}
	s := stripper{in: in, out: make([]byte, 0, len(in))}
	i := s.ws(0)
	end, ok := s.value(i, levelRoot)
	if !ok || s.ws(end) != len(in) {
		return in
	}
	return s.out
}

type stripper struct {
	in  []byte
	out []byte
}

// ws skips white space from i.
func (s *stripper) ws(i int) int {
	for i < len(s.in) {
		switch s.in[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value copies the value at i, at level l, to out, and returns where it
// ends.
func (s *stripper) value(i int, l level) (int, bool) {
	if i >= len(s.in) {
		return i, false
	}
	switch {
	case l == levelVerbatim:
		end, ok := skip(s.in, i)
		s.out = append(s.out, s.in[i:end]...)
		return end, ok
	case s.in[i] == '{' && l != levelItems:
		return s.object(i, l)
	case s.in[i] == '[' && l == levelItems:
		return s.array(i)
	}
	return s.value(i, levelVerbatim)
}

// object copies the object at i, without the managed fields at
// levelMetadata.
func (s *stripper) object(i int, l level) (int, bool) {
	s.out = append(s.out, '{')
	i = s.ws(i + 1)
	if i < len(s.in) && s.in[i] == '}' {
		s.out = append(s.out, '}')
		return i + 1, true
	}
	first := true
	for {
		if i >= len(s.in) || s.in[i] != '"' {
			return i, false
		}
		kEnd, ok := skipString(s.in, i)
		if !ok {
			return kEnd, false
		}
		key := s.in[i:kEnd]
		i = s.ws(kEnd)
		if i >= len(s.in) || s.in[i] != ':' {
			return i, false
		}
		i = s.ws(i + 1)
		if l == levelMetadata && bytes.Equal(key, keyManagedFields) {
			if i, ok = skip(s.in, i); !ok {
				return i, false
			}
		} else {
			if !first {
				s.out = append(s.out, ',')
			}
			first = false
			s.out = append(s.out, key...)
			s.out = append(s.out, ':')
			if i, ok = s.value(i, l.child(key[1:len(key)-1])); !ok {
				return i, false
			}
		}
		var done bool
		if i, done, ok = s.next(i, '}'); done || !ok {
			return i, ok
		}
	}
}

// next reads what follows a member or an element: a comma, after which it
// returns where the next one starts, or close, which it copies.
func (s *stripper) next(i int, closer byte) (int, bool, bool) {
	i = s.ws(i)
	switch {
	case i >= len(s.in):
		return i, false, false
	case s.in[i] == ',':
		return s.ws(i + 1), false, true
	case s.in[i] == closer:
		s.out = append(s.out, closer)
		return i + 1, true, true
	}
	return i, false, false
}

// array copies a list's items, each an object.
func (s *stripper) array(i int) (int, bool) {
	s.out = append(s.out, '[')
	i = s.ws(i + 1)
	if i < len(s.in) && s.in[i] == ']' {
		s.out = append(s.out, ']')
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = s.value(i, levelObject); !ok {
			return i, false
		}
		var done bool
		if i, done, ok = s.next(i, ']'); done || !ok {
			return i, ok
		}
		s.out = append(s.out, ',')
	}
}

// skipString returns where the string at i ends.
func skipString(in []byte, i int) (int, bool) {
	for j := i + 1; j < len(in); j++ {
		switch in[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(in), false
}

// skip returns where the value at i ends, without checking more of it than
// its nesting and strings.
func skip(in []byte, i int) (int, bool) {
	if i >= len(in) {
		return i, false
	}
	switch in[i] {
	case '"':
		return skipString(in, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(in); j++ {
			switch in[j] {
			case '"':
				end, ok := skipString(in, j)
				if !ok {
					return end, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return len(in), false
	}
	// A number, true, false or null.
	j := i
	for j < len(in) {
		switch in[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
		j++
	}
	return j, j > i
}
