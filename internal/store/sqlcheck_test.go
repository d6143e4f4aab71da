package store_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// sqlPackages hold the scheduler's hand-written SQL: the store's named queries, the job
// contract's (its entity locks), the jobs' statements and the demo data's.
var sqlPackages = []string{"internal/store", "internal/jobcontract", "internal/jobs", "internal/seed"}

// sqlStart tells a string that is a statement from one that is not (such as the audit
// log's action names "update" and "delete": a statement has more than its first word).
var sqlStart = regexp.MustCompile(`(?is)^\s*(--[^\n]*\n\s*)*(SELECT|INSERT|UPDATE|DELETE|WITH)\s+\S`)

// statement is one SQL statement found in the source, and where.
type statement struct {
	where string // file:line (name)
	sql   string
}

// Every SQL statement of the store, the jobs and the seed, found by walking their source
// (string constants, and string literals passed to Exec, Query and QueryRow), is prepared
// against the freshly migrated schema: a renamed column or table fails here, at test time,
// instead of in a run. A new statement is covered without being registered anywhere.
func TestEveryStatementPreparesAgainstTheSchema(t *testing.T) {
	t.Parallel()
	var all []statement
	for _, dir := range sqlPackages {
		found, err := statementsIn(filepath.Join(testdb.RepoRoot(), dir))
		require.NoError(t, err)
		all = append(all, found...)
	}
	require.Greater(t, len(all), 50, "the walk finds the statements")
	t.Logf("%d statements", len(all))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, st := range all {
		// @name placeholders become $n as pgx.NamedArgs rewrites them at run time.
		sql, _, err := pgx.NamedArgs{}.RewriteQuery(ctx, conn, st.sql, nil)
		require.NoError(t, err, st.where)
		if _, err := conn.Prepare(ctx, "", sql); err != nil {
			var pgErr *pgconn.PgError
			// A parameter whose type only the caller's argument decides (SELECT $1) says
			// nothing about the schema.
			if errors.As(err, &pgErr) && pgErr.Code == "42P18" {
				continue
			}
			t.Errorf("%s does not prepare against the migrated schema: %v\n%s", st.where, err, st.sql)
		}
	}
}

// statementsIn parses the non-test Go files of dir and returns their SQL statements: string
// constants (package-level or local, concatenations of literals and other constants
// included) and string literals passed straight to Exec, Query or QueryRow.
func statementsIn(dir string) ([]statement, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	// Every string constant of the package, by name, to resolve concatenations.
	consts := map[string]ast.Expr{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if d, ok := n.(*ast.GenDecl); ok && d.Tok == token.CONST {
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[name.Name] = vs.Values[i]
						}
					}
				}
			}
			return true
		})
	}
	var out []statement
	add := func(pos token.Pos, name string, e ast.Expr) {
		s, ok := stringValue(e, consts, 0)
		if !ok || !sqlStart.MatchString(s) {
			return
		}
		p := fset.Position(pos)
		out = append(out, statement{where: fmt.Sprintf("%s:%d (%s)", filepath.Base(p.Filename), p.Line, name), sql: s})
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						add(name.Pos(), name.Name, n.Values[i])
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Exec" && sel.Sel.Name != "Query" && sel.Sel.Name != "QueryRow") {
					return true
				}
				for _, arg := range n.Args {
					if lit, ok := arg.(*ast.BasicLit); ok {
						add(lit.Pos(), sel.Sel.Name+" literal", lit)
					}
				}
			}
			return true
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out, nil
}

// stringValue evaluates a constant string expression: literals, constants of the package and
// their concatenations.
func stringValue(e ast.Expr, consts map[string]ast.Expr, depth int) (string, bool) {
	if depth > 20 {
		return "", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		if c, ok := consts[e.Name]; ok {
			return stringValue(c, consts, depth+1)
		}
	case *ast.ParenExpr:
		return stringValue(e.X, consts, depth+1)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, ok1 := stringValue(e.X, consts, depth+1)
		r, ok2 := stringValue(e.Y, consts, depth+1)
		return l + r, ok1 && ok2
	}
	return "", false
}
