package api

import (
	"context"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/store"
)

// listPartitions shows who leads what, on any replica: each partition's holder and term
// (partition 0 is the coordinator's), and each replica's count. A holder is the one that
// renewed its partition within the lease, not the last name its row keeps, so a dead or
// paused replica's partitions read as held by nobody until they are taken over.
func (s *Server) listPartitions(ctx context.Context, _ *struct{}) (*client.Partitions, error) {
	holdings, err := s.cfg.DB.PartitionHoldings(ctx, s.cfg.LeaseTimeout)
	if err != nil {
		return nil, err
	}
	jobs, err := s.cfg.DB.PartitionJobs(ctx)
	if err != nil {
		return nil, err
	}
	instances, err := s.cfg.DB.Instances(ctx)
	if err != nil {
		return nil, err
	}
	out := &client.Partitions{Count: len(holdings), Partitions: make([]client.Partition, len(holdings))}
	held := map[string]int{}
	coordinator := ""
	for i, h := range holdings {
		p := partitionView(h, jobs[h.Partition])
		if h.Partition == 0 {
			p.Coordinator = true
			p.Jobs += int64(len(s.cfg.Jobs))
		}
		if p.Holder != nil {
			held[*p.Holder]++
			if p.Coordinator {
				coordinator = *p.Holder
			}
		}
		out.Partitions[i] = p
	}
	// Every registered replica, holding partitions or not (one holding none is worth seeing),
	// and any holder whose registration is already gone.
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out.Replicas = append(out.Replicas, client.PartitionReplica{InstanceID: id, Partitions: held[id],
				Coordinator: id == coordinator, IsSelf: id == s.cfg.InstanceID})
		}
	}
	for _, in := range instances {
		add(in.InstanceID)
	}
	for _, h := range holdings {
		if h.Held {
			add(h.LastHolder)
		}
	}
	if out.Replicas == nil {
		out.Replicas = []client.PartitionReplica{}
	}
	return out, nil
}

// partitionView is one partition as GET /v1/partitions shows it.
func partitionView(h store.PartitionHolding, jobs int64) client.Partition {
	p := client.Partition{Partition: h.Partition, Epoch: h.Epoch, Since: utcPtr(h.Since), RenewedAt: utcPtr(h.RenewedAt),
		Handovers: h.Handovers, Jobs: jobs}
	if h.LastHolder != "" {
		last := h.LastHolder
		p.LastHolder = &last
		if h.Held {
			p.Holder = &last
		}
	}
	if h.TermID != nil {
		id := h.TermID.String()
		p.TermID = &id
	}
	return p
}
