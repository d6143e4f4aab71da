package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// clientCalls calls every exported method of Client that sends a request, in namespace
// default and in another, keyed by the method's name.
var clientCalls = map[string]func(ctx context.Context, c *Client) error{
	"ListJobs": func(ctx context.Context, c *Client) error {
		_, err := c.ListJobs(ctx, ListJobsOptions{Limit: 5, Cursor: "x", Status: "failing"})
		return err
	},
	"AllJobs": func(ctx context.Context, c *Client) error {
		_, err := c.AllJobs(ctx, ListJobsOptions{AllNamespaces: true})
		return err
	},
	"GetJob": func(ctx context.Context, c *Client) error { _, err := c.GetJob(ctx, "a job"); return err },
	"CreateJob": func(ctx context.Context, c *Client) error {
		_, err := c.CreateJob(ctx, map[string]any{}, WriteJobOptions{DryRun: true})
		return err
	},
	"PutJob": func(ctx context.Context, c *Client) error {
		_, err := c.PutJob(ctx, "j", map[string]any{}, WriteJobOptions{Version: 2, Reason: "r"})
		return err
	},
	"DeleteJob": func(ctx context.Context, c *Client) error { return c.DeleteJob(ctx, "j", WriteJobOptions{Version: 1}) },
	"PauseJob":  func(ctx context.Context, c *Client) error { _, err := c.PauseJob(ctx, "j", "r"); return err },
	"ResumeJob": func(ctx context.Context, c *Client) error { _, err := c.ResumeJob(ctx, "j", ""); return err },
	"TriggerRun": func(ctx context.Context, c *Client) error {
		_, err := c.TriggerRun(ctx, "j", TriggerOptions{Reason: "r", IdempotencyKey: "k", Wait: 1})
		return err
	},
	"ListRuns": func(ctx context.Context, c *Client) error {
		_, err := c.ListRuns(ctx, "j", ListRunsOptions{Limit: 3})
		return err
	},
	"ListSlots": func(ctx context.Context, c *Client) error {
		_, err := c.ListSlots(ctx, "j", "2026-11-24T00:00:00Z", "")
		return err
	},
	"ListNotifications": func(ctx context.Context, c *Client) error {
		_, err := c.ListNotifications(ctx, "j", 5)
		return err
	},
	"Backfill": func(ctx context.Context, c *Client) error {
		_, err := c.Backfill(ctx, "j", BackfillRequest{Only: "all"})
		return err
	},
	"GetRun":         func(ctx context.Context, c *Client) error { _, err := c.GetRun(ctx, 7); return err },
	"CancelRun":      func(ctx context.Context, c *Client) error { _, err := c.CancelRun(ctx, 7, ""); return err },
	"RerunRun":       func(ctx context.Context, c *Client) error { _, err := c.RerunRun(ctx, 7, "r"); return err },
	"Leader":         func(ctx context.Context, c *Client) error { _, err := c.Leader(ctx); return err },
	"Partitions":     func(ctx context.Context, c *Client) error { _, err := c.Partitions(ctx); return err },
	"Instances":      func(ctx context.Context, c *Client) error { _, err := c.Instances(ctx); return err },
	"StepDown":       func(ctx context.Context, c *Client) error { _, err := c.StepDown(ctx, ""); return err },
	"Drain":          func(ctx context.Context, c *Client) error { _, err := c.Drain(ctx, "r1", ""); return err },
	"Whoami":         func(ctx context.Context, c *Client) error { _, err := c.Whoami(ctx); return err },
	"OIDCKeys":       func(ctx context.Context, c *Client) error { _, err := c.OIDCKeys(ctx); return err },
	"RotateOIDCKeys": func(ctx context.Context, c *Client) error { _, err := c.RotateOIDCKeys(ctx, "r"); return err },
	"ListNamespaces": func(ctx context.Context, c *Client) error { _, err := c.ListNamespaces(ctx); return err },
	"GetNamespace":   func(ctx context.Context, c *Client) error { _, err := c.GetNamespace(ctx, "billing"); return err },
	"PutNamespace": func(ctx context.Context, c *Client) error {
		_, _, err := c.PutNamespace(ctx, "billing", NamespaceRequest{})
		return err
	},
	"CreateToken": func(ctx context.Context, c *Client) error {
		_, err := c.CreateToken(ctx, TokenRequest{Name: "t"})
		return err
	},
	"ListTokens":  func(ctx context.Context, c *Client) error { _, err := c.ListTokens(ctx); return err },
	"RevokeToken": func(ctx context.Context, c *Client) error { return c.RevokeToken(ctx, "tok_1", "") },
	"PutSecret": func(ctx context.Context, c *Client) error {
		_, err := c.PutSecret(ctx, "S", "v", []string{"h"})
		return err
	},
	"ListSecrets":  func(ctx context.Context, c *Client) error { _, err := c.ListSecrets(ctx); return err },
	"DeleteSecret": func(ctx context.Context, c *Client) error { return c.DeleteSecret(ctx, "S") },
}

// notCalls are Client's exported methods that send nothing.
var notCalls = []string{"InNamespace"}

// Every route the client calls, with its method, is one api/openapi.yaml declares: the
// client's calls go to a server that records them, and each is matched against the
// document's path templates. A method of Client that is neither called here nor listed in
// notCalls fails the test, so a new call cannot skip the check.
func TestClientCallsOnlyDocumentedRoutes(t *testing.T) {
	t.Parallel()
	routes := documentedRoutes(t)

	var mu sync.Mutex
	var called []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		called = append(called, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()

	typ := reflect.TypeFor[*Client]()
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if _, ok := clientCalls[name]; !ok && !slices.Contains(notCalls, name) {
			t.Errorf("Client.%s is not in clientCalls: add a call of it, so its route is checked", name)
		}
	}
	for _, ns := range []string{"default", "billing"} {
		c := New(srv.URL, WithNamespace(ns), WithToken("t"))
		for name, call := range clientCalls {
			require.NoError(t, call(t.Context(), c), name)
		}
	}

	require.NotEmpty(t, called)
	for _, call := range called {
		method, path, _ := strings.Cut(call, " ")
		methods, template := routes.match(path)
		switch {
		case methods == nil:
			t.Errorf("the client calls %s, which api/openapi.yaml does not declare", call)
		case !slices.Contains(methods, strings.ToLower(method)):
			t.Errorf("the client calls %s; api/openapi.yaml declares %s only with %v", call, template, methods)
		}
	}
}

type route struct {
	template string
	re       *regexp.Regexp
	methods  []string
}

type routeTable []route

func (rt routeTable) match(path string) ([]string, string) {
	for _, r := range rt {
		if r.re.MatchString(path) {
			return r.methods, r.template
		}
	}
	return nil, ""
}

// documentedRoutes reads api/openapi.yaml's paths: each template as a pattern ({x}: one
// path segment) with the methods it declares.
func documentedRoutes(t *testing.T) routeTable {
	t.Helper()
	b, err := os.ReadFile("../api/openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	require.NotEmpty(t, doc.Paths)
	param := regexp.MustCompile(`\\\{[^/]+\\\}`)
	var rt routeTable
	for template, ops := range doc.Paths {
		r := route{template: template, re: regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(template), `[^/]+`) + "$")}
		for m := range ops {
			if slices.Contains([]string{"get", "put", "post", "delete", "patch", "head"}, m) {
				r.methods = append(r.methods, m)
			}
		}
		rt = append(rt, r)
	}
	return rt
}
