package store_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The store holds no business rules: it imports no package of the scheduler's domain (what
// an end means is internal/runend's), and one statement announces the end of a run.
func TestStoreHoldsNoRulesAndEndsRunsInOnePlace(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	announcers := map[string]int{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			assert.False(t, strings.HasPrefix(path, "github.com/schedulerhq/scheduler/internal/"),
				"%s imports %s: the store decides nothing of the domain", name, path)
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		if n := strings.Count(string(src), "pg_notify('` + RunFinishedChannel"); n > 0 {
			announcers[name] = n
		}
	}
	assert.Equal(t, map[string]int{"runs_end.go": 1}, announcers, "the end of a run is announced by endRunsSQL alone")
}
