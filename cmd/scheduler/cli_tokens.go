package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/access"
)

// scheduler token create|list|revoke (admin) and scheduler whoami (anyone).

// roleWhere says what a role in a namespace is: "editor of namespace billing", "admin of
// every namespace".
func roleWhere(role, ns string) string {
	if ns == "" || ns == access.AllNamespaces {
		return role + " of every namespace"
	}
	return role + " of namespace " + ns
}

func tokenCreateFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	name := fs.String("name", "", "what the token is for, shown in the audit log and token list (e.g. billing-ci); required")
	role := fs.String("role", "", "viewer (reads), editor (also changes jobs and secrets) or admin (everything, every namespace); required")
	expiresIn := fs.Duration("expires-in", 0, "the token stops working after this long, such as 720h (0: never)")
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, _ []string) int {
		switch {
		case *name == "":
			fmt.Fprintln(x.stderr, "scheduler token create: --name is required (what the token is for, e.g. --name billing-ci)")
			return exitUsage
		case !access.ValidRole(*role):
			fmt.Fprintf(x.stderr, "scheduler token create: --role must be viewer, editor or admin, not %q\n", *role)
			return exitUsage
		case *role == access.RoleAdmin && x.nsGiven:
			fmt.Fprintln(x.stderr, "scheduler token create: an admin token acts in every namespace; leave -n out")
			return exitUsage
		case *role != access.RoleAdmin && !x.nsGiven:
			// Named on the command line, not taken from SCHEDULER_NAMESPACE: whom a token
			// is handed to is decided on purpose.
			fmt.Fprintf(x.stderr, "scheduler token create: a %s token acts in one namespace; name it with -n NS\n", *role)
			return exitUsage
		case *expiresIn < 0:
			fmt.Fprintln(x.stderr, "scheduler token create: --expires-in must not be negative")
			return exitUsage
		}
		req := client.TokenRequest{Name: *name, Role: *role, Reason: *reason}
		if *role != access.RoleAdmin {
			req.Namespace = x.ns
		}
		if *expiresIn > 0 {
			req.ExpiresIn = expiresIn.String()
		}
		t, err := x.c.CreateToken(ctx, req)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(t)
		}
		expires := "never expires"
		if t.ExpiresAt != nil {
			expires = "expires " + x.when(t.ExpiresAt)
		}
		ns := ""
		if t.Namespace != nil {
			ns = *t.Namespace
		}
		// The value alone goes to stdout, so `scheduler token create ... > file` or $(...)
		// keeps it and nothing else; what to do with it goes to the terminal.
		fmt.Fprintf(x.stderr, "Created token %s (%q): %s, %s.\n", t.ID, t.Name, roleWhere(t.Role, ns), expires)
		fmt.Fprintln(x.stdout, t.Token)
		fmt.Fprintf(x.stderr, "This is the only time the token is shown: the scheduler keeps only a hash of it. Store it now\n"+
			"and hand it over as SCHEDULER_API_TOKEN. Revoke it with: scheduler token revoke %s\n", t.ID)
		return exitOK
	}
}

func tokenListFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		tokens, err := x.c.ListTokens(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(client.Tokens{Tokens: tokens})
		}
		if len(tokens) == 0 {
			fmt.Fprintln(x.stdout, "no tokens made with scheduler token create (the environment's tokens are not listed)")
			return exitOK
		}
		tw := x.table()
		fmt.Fprintln(tw, "ID\tNAME\tROLE\tNAMESPACE\tEXPIRES\tREVOKED\tCREATED BY")
		for _, t := range tokens {
			ns := "(all)"
			if t.Namespace != nil {
				ns = *t.Namespace
			}
			expires := "never"
			if t.ExpiresAt != nil {
				expires = x.when(t.ExpiresAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, oneLine(t.Name, 40), t.Role, ns, expires, x.when(t.RevokedAt), creatorText(t.CreatedBy))
		}
		tw.Flush()
		return exitOK
	}
}

func tokenRevokeFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, args []string) int {
		if err := x.c.RevokeToken(ctx, args[0], *reason); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(map[string]any{"id": args[0], "revoked": true})
		}
		fmt.Fprintf(x.stdout, "revoked %s: every replica refuses it within a second\n", args[0])
		return exitOK
	}
}

// roleMeaning says what a role may do, for whoami.
var roleMeaning = map[string]string{
	access.RoleViewer: "read its jobs, runs and audit log",
	access.RoleEditor: "read, and define, trigger, pause and delete its jobs, and manage its secrets",
	access.RoleAdmin:  "everything, and namespaces, tokens, built-in jobs and leadership",
}

func whoamiFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		w, err := x.c.Whoami(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(w)
		}
		var who string
		switch w.Kind {
		case access.KindToken:
			who = fmt.Sprintf("token %q (%s), made with scheduler token create", w.TokenName, w.TokenID)
		case access.KindOIDC:
			who = fmt.Sprintf("service account %q (OIDC)", w.TokenName)
		case access.KindNone:
			who = "no token: this replica requires none (it answers on loopback only)"
		default:
			who = "the replica's " + w.TokenName
		}
		tw := x.table()
		fmt.Fprintf(tw, "Caller:\t%s\n", who)
		if len(w.Grants) == 0 {
			fmt.Fprintln(tw, "Access:\tnone")
		}
		for i, g := range w.Grants {
			label := "Access:"
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(tw, "%s\t%s: %s\n", label, roleWhere(g.Role, g.Namespace), roleMeaning[g.Role])
		}
		tw.Flush()
		return exitOK
	}
}

// creatorText says who made a token: the name of the token that made it, or, for a
// credential with no name, which one.
func creatorText(by string) string {
	switch by {
	case access.KindNone, "":
		return "local admin (no token)"
	case access.KindEnvAdmin:
		return "environment token (SCHEDULER_API_TOKEN)"
	case access.KindEnvNext:
		return "environment token (SCHEDULER_API_TOKEN_NEXT)"
	case access.KindEnvRead:
		return "environment read token (SCHEDULER_API_READ_TOKEN)"
	case access.KindOIDC:
		return "an OIDC login"
	}
	return by
}
