package migrations_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// scalingPage is the page whose "Scaling" section audits the schema.
const scalingPage = "../docs/design.md"

// Placements a table of the audit may have (the first word of its cell).
var placements = []string{"distributed", "reference", "coordinator"}

var placementWord = regexp.MustCompile(`^[a-z]+`)

// TestScalingAuditNamesTheSchema keeps docs/design.md's audit of the schema ("What in the schema stops
// it, and what replaces it") true: after every migration, each table has a placement there, and every
// trigger, every sequence, and every primary, unique or foreign key of a table placed
// "distributed" that lacks partition_id (on the table or on any of its partitions, a day's
// partition written pYYYYMMDD) is named with what replaces it. A key, a trigger or a table
// that a later migration adds fails this test until the audit says what becomes of it. And
// every name the audit's tables give exists, so a removed one cannot linger on the page.
func TestScalingAuditNamesTheSchema(t *testing.T) {
	ctx := context.Background()
	u := testdb.New(t)
	pool, err := pgxpool.New(ctx, u)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	page, err := os.ReadFile(scalingPage)
	require.NoError(t, err)
	placed := auditTable(t, string(page), "| table | placement |")
	named := auditTable(t, string(page), "| object | kind |")

	tables := catalogNames(ctx, t, pool, tablesSQL)
	distributed := map[string]bool{}
	for table, placement := range placed {
		if !slices.Contains(tables, table) {
			t.Errorf("%s places table %s, which the schema does not have", scalingPage, table)
		}
		word := placementWord.FindString(placement)
		if !slices.Contains(placements, word) {
			t.Errorf("%s places %s as %q: a placement starts with one of %v", scalingPage, table, placement, placements)
		}
		distributed[table] = word == "distributed"
	}
	for _, table := range tables {
		if _, ok := placed[table]; !ok {
			t.Errorf("table %s has no placement in %s: add a row to its table of placements (| table | placement | ...)", table, scalingPage)
		}
	}

	var mustName []string
	mustName = append(mustName, catalogNames(ctx, t, pool, triggersSQL)...)
	mustName = append(mustName, catalogNames(ctx, t, pool, sequencesSQL)...)
	mustName = append(mustName, catalogNames(ctx, t, pool, keysWithoutPartitionSQL, distributedNames(distributed))...)
	for _, name := range mustName {
		if _, ok := named[name]; !ok {
			t.Errorf("%s does not name %s: add a row saying what replaces it past one PostgreSQL (| object | kind | ...)", scalingPage, name)
		}
	}
	existing := catalogNames(ctx, t, pool, objectsSQL)
	for name := range named {
		if !slices.Contains(existing, name) {
			t.Errorf("%s names %s, which the schema does not have", scalingPage, name)
		}
	}
}

func distributedNames(distributed map[string]bool) []string {
	var names []string
	for table, yes := range distributed {
		if yes {
			names = append(names, table)
		}
	}
	return names
}

// dayPartition is a day's partition in a name (job_runs_p20261129_slot_key).
var dayPartition = regexp.MustCompile(`_p\d{8}(_|$)`)

// catalogNames runs one of the catalog queries below; a day partition's name is written
// pYYYYMMDD, so that every day's copy is one name.
func catalogNames(ctx context.Context, t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(ctx, sql, args...)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		name = dayPartition.ReplaceAllString(name, "_pYYYYMMDD$1")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	require.NoError(t, rows.Err())
	return names
}

// auditTable reads the markdown table of page whose header starts with header: each row's
// backticked names in its first cell, with the row's second cell.
func auditTable(t *testing.T, page, header string) map[string]string {
	t.Helper()
	_, rest, ok := strings.Cut(page, "\n"+header)
	require.True(t, ok, "%s has no table with the header %q", scalingPage, header)
	names := map[string]string{}
	for i, line := range strings.Split(rest, "\n") {
		if i < 2 { // the rest of the header line and the separator
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		require.GreaterOrEqual(t, len(cells), 4, "a row of %s's table %q has fewer than two cells: %s", scalingPage, header, line)
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			names[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	require.NotEmpty(t, names, "%s's table %q names nothing", scalingPage, header)
	return names
}

var backticked = regexp.MustCompile("`([^`]+)`")

// tablesSQL lists the schema's tables; a partition is its parent's.
const tablesSQL = `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY 1`

// triggersSQL lists the triggers written by a migration, whatever their table; a
// partition's clone of its parent's trigger is the parent's.
const triggersSQL = `
SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND NOT t.tgisinternal AND t.tgparentid = 0
ORDER BY 1`

// sequencesSQL lists the sequences.
const sequencesSQL = `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'S'
ORDER BY 1`

// keysWithoutPartitionSQL lists, for the tables $1 and their partitions at any depth, the
// primary, unique and foreign keys (from them, and to them from any table) and the unique
// indexes that are no key's, whose columns do not include partition_id. A partition's copy
// of its parent's key is the parent's.
const keysWithoutPartitionSQL = `
WITH RECURSIVE placed AS (
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relname = ANY ($1)
    UNION
    SELECT i.inhrelid FROM pg_inherits i JOIN placed p ON p.oid = i.inhparent
),
keys AS (
    SELECT con.conname AS name,
           EXISTS (SELECT 1 FROM pg_attribute a
                   WHERE a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey) AND a.attname = 'partition_id') AS has
    FROM pg_constraint con
    WHERE con.contype IN ('p', 'u', 'f') AND con.conparentid = 0
      AND (con.conrelid IN (SELECT oid FROM placed) OR con.confrelid IN (SELECT oid FROM placed))
    UNION ALL
    SELECT i.relname,
           EXISTS (SELECT 1 FROM pg_attribute a
                   WHERE a.attrelid = x.indrelid AND a.attnum = ANY (x.indkey) AND a.attname = 'partition_id')
    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
    WHERE x.indisunique AND x.indrelid IN (SELECT oid FROM placed)
      AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = x.indexrelid)
      AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = x.indexrelid)
)
SELECT name FROM keys WHERE NOT has ORDER BY 1`

// objectsSQL lists every name the audit may give: tables, indexes, sequences, constraints,
// triggers and functions.
const objectsSQL = `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
UNION SELECT con.conname FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace WHERE n.nspname = 'public'
UNION SELECT t.tgname FROM pg_trigger t WHERE NOT t.tgisinternal
UNION SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'`
