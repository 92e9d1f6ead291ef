package asginstances

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
)

func TestParseSharedCredentials(t *testing.T) {
	type want struct {
		creds aws.Credentials
		err   string
	}
	ok := aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}
	noCreds := "its [default] profile sets no aws_access_key_id and aws_secret_access_key"
	cases := map[string]struct {
		reason string
		data   string
		want   want
	}{
		"DefaultProfile": {
			reason: "The [default] profile's keys are read, with a session token.",
			data:   "[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\naws_session_token = TOKEN\n",
			want:   want{creds: aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "TOKEN"}},
		},
		"KeysBeforeAnySection": {
			reason: "Keys before any section header are go-ini's default section: provider-aws reads them.",
			data:   "aws_access_key_id=AKID\naws_secret_access_key=SECRET",
			want:   want{creds: ok},
		},
		"CaseInsensitive": {
			reason: "Section and key names are read case-insensitively.",
			data:   "[Default]\nAWS_ACCESS_KEY_ID = AKID\nAws_Secret_Access_Key = SECRET\n",
			want:   want{creds: ok},
		},
		"UppercaseDefaultHeader": {
			reason: "go-ini keeps a [DEFAULT] header apart from its default section, so provider-aws reads no credentials there.",
			data:   "[DEFAULT]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n",
			want:   want{err: noCreds},
		},
		"OtherProfilesIgnored": {
			reason: "Only the default profile is read.",
			data:   "[other]\naws_access_key_id = OTHER\naws_secret_access_key = OTHER\n[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n[profile x]\naws_access_key_id = X\n",
			want:   want{creds: ok},
		},
		"OnlyOtherProfile": {
			reason: "Credentials in another profile only are none.",
			data:   "[prod]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n",
			want:   want{err: noCreds},
		},
		"LaterKeyWins": {
			reason: "A repeated key replaces the earlier one, also across repeated sections.",
			data:   "[default]\naws_access_key_id = OLD\n[other]\n[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n",
			want:   want{creds: ok},
		},
		"CommentsAndColons": {
			reason: "Comment lines, inline comments and ':' separators are read as go-ini reads them.",
			data:   "# comment\n; comment\n[default] ; trailing\naws_access_key_id: AKID # inline\naws_secret_access_key = SECRET;inline\n",
			want:   want{creds: ok},
		},
		"QuotedValues": {
			reason: "Quotes around a value are dropped; triple quotes and backticks keep what they enclose.",
			data:   "[default]\naws_access_key_id = \"AKID\"\naws_secret_access_key = 'SECRET'\naws_session_token = \"\"\"TO#KEN\"\"\"\n",
			want:   want{creds: aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "TO#KEN"}},
		},
		"Backticks": {
			reason: "Backticks keep what they enclose, comment characters included.",
			data:   "[default]\naws_access_key_id = `AKID`\naws_secret_access_key = `SEC;RET`\n",
			want:   want{creds: aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SEC;RET"}},
		},
		"ByteOrderMarkAndCRLF": {
			reason: "A UTF-8 byte order mark and CRLF line ends are read.",
			data:   "\ufeff[default]\r\naws_access_key_id = AKID\r\naws_secret_access_key = SECRET\r\n",
			want:   want{creds: ok},
		},
		"MissingSecret": {
			reason: "An access key ID without its secret is no credentials.",
			data:   "[default]\naws_access_key_id = AKID\n",
			want:   want{err: noCreds},
		},
		"Empty": {
			reason: "An empty key is no credentials.",
			data:   "",
			want:   want{err: noCreds},
		},
		"UnclosedSection": {
			reason: "An unclosed section header is an error naming its line.",
			data:   "[default\naws_access_key_id = AKID\n",
			want:   want{err: "line 1: a section header is not closed"},
		},
		"EmptySectionName": {
			reason: "A section header without a name is an error.",
			data:   "[]\n",
			want:   want{err: "line 1: a section header has no name"},
		},
		"NotAKey": {
			reason: "A line without a separator is an error that does not quote it.",
			data:   "[default]\nAKID SECRET\n",
			want:   want{err: "line 2: the line is neither a section header, a comment nor a key and its value"},
		},
		"EmptyKey": {
			reason: "A value without a key is an error.",
			data:   "= AKID\n",
			want:   want{err: "line 1: a key has no name"},
		},
		"ContinuedLine": {
			reason: "go-ini joins a line ending in a backslash with the next: refused rather than read differently.",
			data:   "[default]\naws_access_key_id = AK\\\nID\n",
			want:   want{err: "line 2: continued lines are not supported"},
		},
		"MultiLineValue": {
			reason: "go-ini reads an unclosed triple quote across lines: refused rather than read differently.",
			data:   "[default]\naws_access_key_id = \"\"\"AK\nID\"\"\"\n",
			want:   want{err: "line 2: multi-line values are not supported"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			creds, err := parseSharedCredentials([]byte(tc.data))
			got := want{creds: creds}
			if err != nil {
				got.err = err.Error()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nparseSharedCredentials(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
