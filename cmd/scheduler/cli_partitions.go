package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
)

// partitionsFlags is `scheduler partitions`: who leads what. It says what a partition is on
// its first line, so that a reader who never set SCHEDULER_PARTITIONS knows what the table is.
func partitionsFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		p, err := x.c.Partitions(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(p)
		}
		if p.Count == 1 {
			fmt.Fprintln(x.stdout, "Partitions: 1 (SCHEDULER_PARTITIONS=1: the leader runs every job)")
		} else {
			fmt.Fprintf(x.stdout, "Partitions: %d. Runtime jobs hash by name onto them, and each is led by one replica.\n"+
				"Partition 0 is the coordinator's (the leader scheduler status names): it also runs the built-in jobs.\n", p.Count)
		}
		fmt.Fprintln(x.stdout)
		tw := x.table()
		fmt.Fprintln(tw, "REPLICA\tPARTITIONS\tCOORDINATOR")
		for _, r := range p.Replicas {
			id, coordinator := r.InstanceID, ""
			if r.IsSelf {
				id += " (answering)"
			}
			if r.Coordinator {
				coordinator = "yes"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", id, r.Partitions, coordinator)
		}
		tw.Flush()
		fmt.Fprintln(x.stdout)

		unheld := 0
		tw = x.table()
		fmt.Fprintln(tw, "PARTITION\tHOLDER\tEPOCH\tSINCE\tLAST RENEWED\tJOBS\tHAND-OVERS")
		for _, q := range p.Partitions {
			holder := "-"
			switch {
			case q.Holder != nil:
				holder = *q.Holder
			case q.LastHolder != nil:
				holder = "none (was " + *q.LastHolder + ")"
				unheld++
			default:
				holder = "none (never elected)"
				unheld++
			}
			name := strconv.Itoa(q.Partition)
			if q.Coordinator {
				name += " (coordinator)"
			}
			handovers := strconv.FormatInt(q.Handovers, 10)
			if q.Coordinator {
				handovers = "-" // the leader row keeps no count
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\n", name, holder, q.Epoch, x.when(q.Since), x.when(q.RenewedAt), q.Jobs, handovers)
		}
		tw.Flush()
		if unheld > 0 {
			fmt.Fprintf(x.stdout, "\nnone: %d partition(s) have no holder, and their jobs do not run: a live replica takes a dead or paused "+
				"holder's partitions over within the lease (SCHEDULER_LEASE_TIMEOUT) and a few seconds. If it lasts, check that "+
				"replicas run (scheduler status) and see docs/operations.md, \"Partitions\".\n", unheld)
		}
		return exitOK
	}
}
