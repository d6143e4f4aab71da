package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schedulerhq/scheduler/client"
)

// scheduler secret set|list|delete: a namespace's secrets, which its HTTP jobs send only to
// the hosts each allows. A value never travels on the command line: a flag would be kept in
// the shell's history and shown by ps to every user of the machine.

// maxSecretValue caps a value read; the API takes bodies of at most 64 KiB.
const maxSecretValue = 60 << 10

// stringList is a flag given once per value (--allowed-host a --allowed-host b).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func secretSetFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	var hosts stringList
	fs.Var(&hosts, "allowed-host", "a host the secret may be sent to (e.g. api.example.com); repeat it for more; at least one")
	fromFile := fs.String("from-file", "", "read the value from this file instead of stdin")
	return func(ctx context.Context, x *cli, args []string) int {
		if len(hosts) == 0 {
			fmt.Fprintln(x.stderr, "scheduler secret set: name at least one --allowed-host: the only hosts a job may send the secret to")
			return exitUsage
		}
		value, ok := x.readSecretValue(args[0], *fromFile)
		if !ok {
			return exitUsage
		}
		sec, err := x.c.PutSecret(ctx, args[0], value, hosts)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(sec)
		}
		fmt.Fprintf(x.stdout, "secret %s set in namespace %s; sent only to %s\n", args[0], x.ns, strings.Join(hosts, ", "))
		return exitOK
	}
}

// readSecretValue reads a value from a file or stdin, without the one line end an editor or
// echo adds: a token read back with it would not match.
func (x *cli) readSecretValue(name, file string) (string, bool) {
	r, from := x.stdin, "stdin"
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintf(x.stderr, "scheduler: %v\n", err)
			return "", false
		}
		defer f.Close()
		r, from = f, file
	} else if f, ok := x.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(x.stderr, "Type the value of %s, then Enter and Ctrl-D (it shows as you type: pipe it in, or use --from-file, to keep it off the screen)\n", name)
		}
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSecretValue+1))
	switch {
	case err != nil:
		fmt.Fprintf(x.stderr, "scheduler: read %s: %v\n", from, err)
		return "", false
	case len(b) > maxSecretValue:
		fmt.Fprintf(x.stderr, "scheduler: the value read from %s is larger than %d KiB\n", from, maxSecretValue>>10)
		return "", false
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		fmt.Fprintf(x.stderr, "scheduler: the value read from %s is empty (pipe it in: printf %%s \"$VALUE\" | scheduler secret set %s ...)\n", from, name)
		return "", false
	}
	return string(b), true
}

func secretListFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		secrets, err := x.c.ListSecrets(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(client.Secrets{Secrets: secrets})
		}
		if len(secrets) == 0 {
			fmt.Fprintf(x.stdout, "no secrets in namespace %s\n", x.ns)
			return exitOK
		}
		tw := x.table()
		fmt.Fprintln(tw, "NAME\tALLOWED HOSTS\tUPDATED")
		for _, s := range secrets {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, strings.Join(s.AllowedHosts, ", "), x.when(&s.UpdatedAt))
		}
		tw.Flush()
		return exitOK
	}
}

func secretDeleteFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, args []string) int {
		if err := x.c.DeleteSecret(ctx, args[0]); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(map[string]any{"name": args[0], "namespace": x.ns, "deleted": true})
		}
		fmt.Fprintf(x.stdout, "deleted secret %s of namespace %s\n", args[0], x.ns)
		return exitOK
	}
}
