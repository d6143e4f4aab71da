// The docs' own tests: what README and docs/ name exists, README's figures are BENCHMARKS.md's,
// and README's Layout names every package. They read files only: no database, no network.
package scheduler_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goNames is what the repository's Go code declares: each package (by its directory's last
// element) with its top-level names, and each type's methods and fields, whatever package.
type goNames struct {
	pkgs    map[string]map[string]bool // package → top-level names
	members map[string]map[string]bool // "pkg.Type" and "Type" → methods and fields
}

func readGoNames(t *testing.T) goNames {
	t.Helper()
	n := goNames{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}}
	add := func(m map[string]map[string]bool, k, v string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "tmp") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.Base(filepath.Dir(path))
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					add(n.pkgs, pkg, d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				for {
					switch x := typ.(type) {
					case *ast.StarExpr:
						typ = x.X
						continue
					case *ast.IndexExpr:
						typ = x.X
						continue
					case *ast.IndexListExpr:
						typ = x.X
						continue
					}
					break
				}
				if id, ok := typ.(*ast.Ident); ok {
					add(n.members, id.Name, d.Name.Name)
					add(n.members, pkg+"."+id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, id := range s.Names {
							add(n.pkgs, pkg, id.Name)
						}
					case *ast.TypeSpec:
						add(n.pkgs, pkg, s.Name.Name)
						var fields *ast.FieldList
						switch x := s.Type.(type) {
						case *ast.StructType:
							fields = x.Fields
						case *ast.InterfaceType:
							fields = x.Methods
						}
						if fields == nil {
							continue
						}
						for _, f := range fields.List {
							names := f.Names
							if len(names) == 0 { // embedded: its type's name is the field's
								typ := f.Type
								if st, ok := typ.(*ast.StarExpr); ok {
									typ = st.X
								}
								switch x := typ.(type) {
								case *ast.Ident:
									names = []*ast.Ident{x}
								case *ast.SelectorExpr:
									names = []*ast.Ident{x.Sel}
								}
							}
							for _, id := range names {
								add(n.members, s.Name.Name, id.Name)
								add(n.members, pkg+"."+s.Name.Name, id.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// A name of Go code: Type.Member, pkg.Name, pkg.Type.Member, with or without ().
	goRef = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?(?:\(\))?$`)
	// A test or benchmark by its function's name.
	testRef = regexp.MustCompile(`^(Test|Benchmark)[A-Z][A-Za-z0-9_]*$`)
	// A path in the repository: a file or a directory under one of its top-level folders.
	pathRef = regexp.MustCompile(`^(?:cmd|internal|api|replica|migrations|deploy|docs|examples|scripts|tools)/[A-Za-z0-9_./-]*$`)
)

// madeByTheReader are the files a page tells its reader to make, which the repository holds
// only as an example.
var madeByTheReader = map[string]bool{"deploy/scheduler.env": true}

// TestDocsNameWhatExists: every name of Go code, test, file or directory that README or a page
// of docs/ writes as code exists in the repository, so a rename cannot leave a page behind.
func TestDocsNameWhatExists(t *testing.T) {
	names := readGoNames(t)
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, "README.md", "BENCHMARKS.md") {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codeSpan.FindAllStringSubmatch(string(text), -1) {
			ref := m[1]
			switch {
			case pathRef.MatchString(ref):
				p := strings.TrimSuffix(strings.SplitN(ref, "#", 2)[0], "/")
				if _, err := os.Stat(p); err != nil && !madeByTheReader[p] {
					t.Errorf("%s names %s, which does not exist", page, ref)
				}
			case testRef.MatchString(ref):
				found := false
				for _, decls := range names.pkgs {
					found = found || decls[ref]
				}
				if !found {
					t.Errorf("%s names %s, which no test file declares", page, ref)
				}
			case goRef.MatchString(ref):
				g := goRef.FindStringSubmatch(ref)
				if !names.exists(g[1], g[2], g[3]) {
					t.Errorf("%s names %s, which the code does not declare", page, ref)
				}
			}
		}
	}
}

// exists says whether a.b(.c) names a declaration: pkg.Name, Type.Member, pkg.Type.Member.
// A first part that is neither a package of the repository nor one of its types is someone
// else's (net/http's http.Client) and passes.
func (n goNames) exists(a, b, c string) bool {
	if decls, ok := n.pkgs[a]; ok {
		if !decls[b] {
			return false
		}
		return c == "" || n.members[a+"."+b][c]
	}
	if members, ok := n.members[a]; ok {
		return c == "" && members[b]
	}
	return true
}

// goPackages lists the module's packages relative to its root ("internal/engine").
func goPackages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	return pkgs
}

// section returns the text of page's "## name" section, up to the next "## " heading.
func section(t *testing.T, page, name string) string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(text), "\n## "+name+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", page, name)
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// TestReadmeLayoutNamesEveryPackage: README's Layout names each package of the module by its
// directory, so a new package cannot go unexplained.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	layout := section(t, "README.md", "Layout")
	for _, pkg := range goPackages(t) {
		name := pkg + "/"
		if pkg == "." {
			name = "docs_test.go"
		}
		if !regexp.MustCompile(`(^|[\s,(])` + regexp.QuoteMeta(name) + `($|[\s,)])`).MatchString(layout) {
			t.Errorf("README's Layout does not name %s", name)
		}
	}
}

// figure is a number with its unit as the pages write it: "601 ms", "1.12×", "2713/s",
// and the ends of a range ("0.55–0.71 s").
var figure = regexp.MustCompile(`(\d+(?:\.\d+)?)(?:–(\d+(?:\.\d+)?))?( ?)(ms|s|MB|GB|×|msgs/s|/s)(?:[^\w/]|$)`)

// TestReadmeFiguresAreTheCurrentTable: every figure README's "Measured" quotes is in
// BENCHMARKS.md's current table, so README cannot keep a figure a later run replaced.
func TestReadmeFiguresAreTheCurrentTable(t *testing.T) {
	current := section(t, "BENCHMARKS.md", "Current")
	measured := section(t, "README.md", "Measured")
	quoted := 0
	for _, m := range figure.FindAllStringSubmatch(measured, -1) {
		for _, n := range []string{m[1], m[2]} {
			if n == "" {
				continue
			}
			quoted++
			want := n + m[3] + m[4]
			if m[4] == "×" { // a ratio: the table gives it bare, beside the figures it divides
				want = n
			}
			if !regexp.MustCompile(`(^|[^\d.])` + regexp.QuoteMeta(want) + `($|[^\d.])`).MatchString(current) {
				t.Errorf("README quotes %s (%q), which BENCHMARKS.md's current table does not give", want, m[0])
			}
		}
	}
	if quoted < 5 {
		t.Errorf("README's Measured quotes %d figures; the pattern no longer reads them", quoted)
	}
}

// TestEveryVariableIsDocumented: every environment variable the service reads (a
// "SCHEDULER_…" string of its non-test code, bar the command-line tools') is in a table of
// docs/reference.md or docs/first-application.md, so a new setting cannot go unexplained.
func TestEveryVariableIsDocumented(t *testing.T) {
	var tables strings.Builder
	for _, page := range []string{"docs/reference.md", "docs/first-application.md"} {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(line, "| `") {
				tables.WriteString(line + "\n")
			}
		}
	}
	variable := regexp.MustCompile(`"(SCHEDULER_[A-Z0-9_]*[A-Z0-9])"`)
	for _, dir := range []string{"internal", "replica", "api", "cmd/scheduler"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range variable.FindAllStringSubmatch(string(src), -1) {
				if m[1] == "SCHEDULER_SQL_ROLE" { // refused at start since SQL targets (docs/operations.md)
					continue
				}
				if !strings.Contains(tables.String(), "`"+m[1]+"`") {
					t.Errorf("%s reads %s, which no table of docs/reference.md or docs/first-application.md names", path, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
