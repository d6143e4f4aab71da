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
	assert.Len(t, routed, 20)
}
