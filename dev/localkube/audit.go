package localkube

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// OpenAuditLog reads the audit log an API server writes at path whole: the
// API server rotates it by size (every 100 MB: kube-apiserver's
// --audit-log-maxsize names no limit by default, its log writer then takes
// its own), keeping the older parts beside it as
// <name>-<timestamp><ext>, oldest first by name. Reading only path would
// miss all but the last part.
func OpenAuditLog(path string) (io.ReadCloser, error) {
	ext := filepath.Ext(path)
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-*" + ext)
	if err != nil {
		return nil, errors.Wrap(err, "cannot list the audit log's rotated parts")
	}
	sort.Strings(rotated)
	l := &auditLog{}
	for _, name := range append(rotated, path) {
		f, err := os.Open(name)
		if err != nil {
			_ = l.Close()
			return nil, errors.Wrap(err, "cannot open the audit log")
		}
		l.files = append(l.files, f)
		l.readers = append(l.readers, f)
	}
	l.Reader = io.MultiReader(l.readers...)
	return l, nil
}

// auditLog reads the parts of an audit log one after another.
type auditLog struct {
	io.Reader
	files   []*os.File
	readers []io.Reader
}

// Close closes every part; the first error is returned.
func (l *auditLog) Close() error {
	var first error
	for _, f := range l.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
