package asginstances

import (
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// defaultProfile is the profile provider-aws reads from a credentials
// Secret: github.com/go-ini/ini's DEFAULT section, loaded case-insensitively
// (CredentialsIDSecret). It holds the keys before any section header and
// those of a [default] header in any case but one: go-ini keeps a header
// spelt [DEFAULT] apart, so provider-aws never reads it, and neither does
// the function.
const defaultProfile = "default"

// uppercaseDefault is the header go-ini keeps apart from the default profile.
const uppercaseDefault = "DEFAULT"

// parseSharedCredentials reads the default profile's credentials from an AWS
// shared credentials file, the way go-ini reads it for provider-aws: section
// and key names are case-insensitive, '=' or ':' separates a key from its
// value, a '#' or ';' starts a comment, quotes around a value are dropped,
// and a later key replaces an earlier one. It refuses what go-ini would
// join across lines (continued lines, multi-line quoted values) rather than
// read them differently. Its errors name lines, never their content.
func parseSharedCredentials(data []byte) (aws.Credentials, error) {
	text := strings.TrimPrefix(string(data), "\ufeff")
	section := defaultProfile
	var c aws.Credentials
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimLeftFunc(line, unicode.IsSpace)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			s, err := sectionName(line)
			if err != nil {
				return aws.Credentials{}, errors.Wrapf(err, "line %d", i+1)
			}
			section = s
			continue
		}
		key, value, err := keyValue(line)
		if err != nil {
			return aws.Credentials{}, errors.Wrapf(err, "line %d", i+1)
		}
		if section != defaultProfile {
			continue
		}
		switch key {
		case "aws_access_key_id":
			c.AccessKeyID = value
		case "aws_secret_access_key":
			c.SecretAccessKey = value
		case "aws_session_token":
			c.SessionToken = value
		}
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return aws.Credentials{}, errors.Errorf("its [%s] profile sets no aws_access_key_id and aws_secret_access_key", defaultProfile)
	}
	return c, nil
}

// sectionName returns the name of the section a header line opens.
func sectionName(line string) (string, error) {
	end := strings.LastIndexByte(line, ']')
	if end < 0 {
		return "", errors.New("a section header is not closed")
	}
	name := line[1:end]
	switch name {
	case "":
		return "", errors.New("a section header has no name")
	case uppercaseDefault:
		return name, nil
	}
	return strings.ToLower(name), nil
}

// keyValue splits a key line into its lower-cased key and its value.
func keyValue(line string) (key, value string, err error) {
	i := strings.IndexAny(line, "=:")
	if i < 0 {
		return "", "", errors.New("the line is neither a section header, a comment nor a key and its value")
	}
	key = strings.ToLower(strings.TrimSpace(line[:i]))
	if key == "" {
		return "", "", errors.New("a key has no name")
	}
	value, err = iniValue(line[i+1:])
	return key, value, err
}

// iniValue reads a value as go-ini does with its default options.
func iniValue(s string) (string, error) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	for _, q := range []string{`"""`, "`"} {
		if !strings.HasPrefix(s, q) || (q == `"""` && len(s) == len(q)) {
			continue
		}
		end := strings.LastIndex(s[len(q):], q)
		if end < 0 {
			return "", errors.New("multi-line values are not supported")
		}
		return s[len(q) : len(q)+end], nil
	}
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, `\`) {
		return "", errors.New("continued lines are not supported")
	}
	if i := strings.IndexAny(s, "#;"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && strings.IndexByte(s[1:], s[0]) == len(s)-2 {
		s = s[1 : len(s)-1]
	}
	return s, nil
}
