package targets

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
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

// The server reads these texts as the lexer does: each holds "; COMMIT" only inside a
// string, an identifier or a comment, the lexer lets it through, and the server runs it
// inside the run's transaction, which commits it with its marker.
func TestTransactionControlReadsTextAsTheServerDoes(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	f.exec(t, `ALTER ROLE `+f.login+` SET standard_conforming_strings = off`)
	for i, text := range []string{
		`SELECT E'\'; COMMIT; --'`,
		`SELECT '\'; SELECT '; COMMIT; --'`,
		`SELECT 'it''s; COMMIT'`,
		`SELECT U&'\0041; COMMIT'`,
		`SELECT $$; COMMIT; $$`,
		`SELECT $tag$ $$; COMMIT; $$ $tag$`,
		`SELECT 1 AS "a;""COMMIT"`,
		"SELECT 1 -- ; COMMIT\n",
		`SELECT 1 /* /* */ ; COMMIT */`,
		`DO $x$ BEGIN PERFORM 1; END $x$`,
		`SELECT 1 AS a$b$; SELECT 2`,
	} {
		assert.Empty(t, TransactionControl(text), text)
		key := fmt.Sprintf("text-%d", i)
		_, err := f.target.Run(ctx, sqlRun(key, `INSERT INTO effects (key) VALUES ('`+key+`'); `+text))
		require.NoError(t, err, text)
		assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = $1`, key), text)
	}
}

// Random statements whose literals, aliases and comments hold "; COMMIT" in every way the
// lexer must see through, some with a real COMMIT among them: the lexer finds exactly the
// real ones, and the server, running a text without one inside a transaction, runs all of it
// and stays in that transaction.
func TestTransactionControlAgreesWithTheServerOnRandomText(t *testing.T) {
	ctx := sqlTestCtx(t)
	conn, err := pgx.Connect(ctx, testdb.New(t))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `SET standard_conforming_strings = on`) // as a run's session has it
	require.NoError(t, err)
	literals := []string{`1`, `'a;COMMIT'`, `'it''s;COMMIT'`, `'\'`, `E'\';COMMIT'`, `E'\\'`, `e'\\\';COMMIT'`,
		`$$;COMMIT$$`, `$t$ $$;COMMIT $t$`, `$a$;COMMIT$a$`, `U&'\0041;COMMIT'`, `1 AS "a;""COMMIT"`, `1 AS a$b$`, `E'\''`}
	gaps := []string{" ", "\n", "/* ;COMMIT /* nested; */ */", "-- ;COMMIT\n"}
	rng := rand.New(rand.NewPCG(42, 42))
	for range 2000 {
		var b strings.Builder
		commits := 0
		for n := rng.IntN(4) + 1; n > 0; n-- {
			if b.Len() > 0 {
				b.WriteString(";" + gaps[rng.IntN(len(gaps))])
			}
			if rng.IntN(8) == 0 {
				b.WriteString("COMMIT")
				commits++
				continue
			}
			b.WriteString("SELECT" + gaps[rng.IntN(len(gaps))] + literals[rng.IntN(len(literals))])
			for m := rng.IntN(3); m > 0; m-- {
				b.WriteString("," + gaps[rng.IntN(len(gaps))] + literals[rng.IntN(len(literals))])
			}
		}
		text := b.String()
		require.Len(t, TransactionControl(text), commits, text)
		if commits > 0 {
			continue
		}
		var began, now string
		_, err := conn.Exec(ctx, `BEGIN`)
		require.NoError(t, err)
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&began))
		_, _, err = execStatements(ctx, conn.PgConn(), text)
		require.NoError(t, err, text)
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&now))
		require.Equal(t, began, now, "the server left the transaction for %q", text)
		_, err = conn.Exec(ctx, `ROLLBACK`)
		require.NoError(t, err)
	}
}
