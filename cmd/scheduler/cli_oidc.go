package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"
)

// The OIDC commands: the signing keys of the targets' tokens (internal/idp), listed and
// rotated by an admin.

type oidcKeys struct {
	Issuer string `json:"issuer"`
	Keys   []struct {
		KID        string     `json:"kid"`
		State      string     `json:"state"`
		CreatedAt  time.Time  `json:"created_at"`
		CurrentAt  *time.Time `json:"current_at"`
		PreviousAt *time.Time `json:"previous_at"`
		RetiredAt  *time.Time `json:"retired_at"`
	} `json:"keys"`
	Rotated *struct {
		Current  string   `json:"current"`
		Previous string   `json:"previous"`
		Retired  []string `json:"retired"`
	} `json:"rotated"`
}

func oidcKeysFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		var raw json.RawMessage
		if _, err := x.c.do(ctx, "GET", "/v1/oidc/keys", nil, nil, nil, &raw); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		return x.printOIDCKeys(raw)
	}
}

func oidcRotateFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, _ []string) int {
		var raw json.RawMessage
		if _, err := x.c.do(ctx, "POST", "/v1/oidc/keys/rotate", nil, reasonBody(*reason), nil, &raw); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		var k oidcKeys
		_ = json.Unmarshal(raw, &k)
		if k.Rotated != nil {
			fmt.Fprintf(x.stdout, "key %s signs from now on; %s stays published until its tokens have expired\n", k.Rotated.Current, k.Rotated.Previous)
		}
		return x.printOIDCKeys(raw)
	}
}

func (x *cli) printOIDCKeys(raw json.RawMessage) int {
	var k oidcKeys
	if err := json.Unmarshal(raw, &k); err != nil {
		fmt.Fprintf(x.stderr, "scheduler: the answer is not a key list: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(x.stdout, "issuer %s\n", k.Issuer)
	w := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KID\tSTATE\tCREATED\tSINCE")
	for _, key := range k.Keys {
		since := key.CreatedAt
		for _, t := range []*time.Time{key.CurrentAt, key.PreviousAt, key.RetiredAt} {
			if t != nil {
				since = *t
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", key.KID, key.State, key.CreatedAt.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	}
	_ = w.Flush()
	return exitOK
}
