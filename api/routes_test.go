package api

import (
	"net/http"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoutesMatchOpenAPI fails when the router has a route openapi.yaml does not describe,
// or the other way round.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	require.NoError(t, err)
	var spec []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			spec = append(spec, method+" "+path)
		}
	}
	var routed []string
	s := NewServer(Config{})
	err = chi.Walk(s.Handler().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed = append(routed, method+" "+route)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(spec)
	sort.Strings(routed)
	assert.Equal(t, spec, routed, "chi routes and openapi.yaml paths must be the same")
	assert.Len(t, routed, 63)
}

// TestSpecSuitsClientGenerators checks what client generators trip over: every operation has
// a unique operationId (the method name), and no schema, parameter or request body shares
// a name with another (oapi-codegen makes one Go type of each, and refused the spec when a
// request body and a schema were both named Action).
func TestSpecSuitsClientGenerators(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	require.NoError(t, err)
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			require.NotEmpty(t, op.OperationID, "%s has no operationId", where)
			require.NotContains(t, ids, op.OperationID, "%s reuses the operationId of %s", where, ids[op.OperationID])
			ids[op.OperationID] = where
		}
	}
	names := map[string]string{}
	c := doc.Components
	for section, keys := range map[string][]string{
		"schemas": keysOf(c.Schemas), "parameters": keysOf(c.Parameters), "requestBodies": keysOf(c.RequestBodies),
	} {
		for _, k := range keys {
			require.NotContains(t, names, k, "component %s is both in %s and in %s", k, section, names[k])
			names[k] = section
		}
	}
}

func keysOf[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
