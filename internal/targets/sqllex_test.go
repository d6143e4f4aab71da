package targets

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every way a transaction-ending statement can stand in a job's text is found; none hidden in
// a string, an identifier or a comment is.
func TestTransactionControlFindsEveryTopLevelStatement(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{`INSERT INTO effects VALUES (1)`, nil},
		{`INSERT INTO effects VALUES (1); COMMIT; INSERT INTO effects VALUES (2); BEGIN`, []string{"statement 2: COMMIT", "statement 4: BEGIN"}},
		{`commit`, []string{"statement 1: COMMIT"}},
		{"SELECT 1;\n  /* a /* nested */ comment */ -- and one more\n  CoMmIt PREPARED 'x'", []string{"statement 2: COMMIT"}},
		{`SELECT 1; END`, []string{"statement 2: END"}},
		{`SELECT 1; ROLLBACK; START TRANSACTION`, []string{"statement 2: ROLLBACK", "statement 3: START"}},
		{`ABORT`, []string{"statement 1: ABORT"}},
		{`SAVEPOINT a; RELEASE a; ROLLBACK TO a`, []string{"statement 1: SAVEPOINT", "statement 2: RELEASE", "statement 3: ROLLBACK"}},
		{`PREPARE TRANSACTION 'x'`, []string{"statement 1: PREPARE TRANSACTION"}},
		{`PREPARE q AS SELECT 1; EXECUTE q`, nil},
		{`SELECT 'a;COMMIT'`, nil},
		{`SELECT 'it''s; COMMIT'`, nil},
		{`SELECT E'\'; COMMIT; --'`, nil},
		{`SELECT e'\\'; COMMIT; --'`, []string{"statement 2: COMMIT"}},
		// standard_conforming_strings is on in the run's session: a backslash is a byte.
		{`SELECT '\'; COMMIT; --'`, []string{"statement 2: COMMIT"}},
		{`SELECT name'x'; COMMIT`, []string{"statement 2: COMMIT"}},
		{`SELECT 1e'\'; COMMIT; --'`, nil},
		{`SELECT $$; COMMIT; $$`, nil},
		{`SELECT $tag$ $$; COMMIT; $$ $tag$; COMMIT`, []string{"statement 2: COMMIT"}},
		{`DO $x$ BEGIN COMMIT; END $x$`, nil},
		{`SELECT a$b$; COMMIT; $b$ FROM t`, []string{"statement 2: COMMIT"}},
		{`SELECT $1; COMMIT`, []string{"statement 2: COMMIT"}},
		{`SELECT "a;""COMMIT"`, nil},
		{`SELECT 1 -- ; COMMIT` + "\nFROM t", nil},
		{`SELECT 1 /* ; COMMIT */`, nil},
		{`SELECT 1 /* /* */ ; COMMIT */`, nil},
		{`SELECT 1 +-- ; COMMIT` + "\n; COMMIT", []string{"statement 2: COMMIT"}},
		{`(SELECT 1); "commit"`, nil},
		{`UPDATE t SET "end" = 1; SELECT begin FROM t`, nil},
		{`;;COMMIT;;`, []string{"statement 3: COMMIT"}},
	} {
		assert.Equal(t, tc.want, TransactionControl(tc.text), tc.text)
	}
}

// Fuzzing the lexer: it never panics, and COMMIT after any text that closes its own quotes
// and comments (as an appended statement does) is found.
func FuzzTransactionControl(f *testing.F) {
	for _, s := range []string{`SELECT 1`, `SELECT 'a'`, `SELECT $$x$$`, `/* a */ SELECT "b"`, `SELECT E'\''`, `-- c`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		_ = TransactionControl(text)
		if strings.ContainsAny(text, `'"$-/\`) {
			return // the text may leave a quote or a comment open, which would swallow the COMMIT
		}
		found := TransactionControl(text + ";\nCOMMIT")
		if len(found) == 0 || !strings.HasSuffix(found[len(found)-1], "COMMIT") {
			t.Fatalf("COMMIT after %q not found: %v", text, found)
		}
	})
}
