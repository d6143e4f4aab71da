package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/schedulerhq/scheduler/client"
)

// The OIDC commands: the signing keys of the targets' tokens (internal/idp), listed and
// rotated by an admin.

func oidcKeysFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		k, err := x.c.OIDCKeys(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(k)
		}
		return x.printOIDCKeys(k)
	}
}

func oidcRotateFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, _ []string) int {
		k, err := x.c.RotateOIDCKeys(ctx, *reason)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(k)
		}
		if k.Rotated != nil {
			fmt.Fprintf(x.stdout, "key %s signs from now on; %s stays published until its tokens have expired\n", k.Rotated.Current, k.Rotated.Previous)
		}
		return x.printOIDCKeys(k)
	}
}

func (x *cli) printOIDCKeys(k *client.OIDCKeys) int {
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
