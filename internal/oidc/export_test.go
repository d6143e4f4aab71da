package oidc

import "time"

// SetKeyRefreshInterval changes how soon after a fetch v fetches the keys again, so that a
// test can show both a refetch and a refetch declined without waiting.
func SetKeyRefreshInterval(v *Verifier, d time.Duration) {
	v.keysTransport.mu.Lock()
	defer v.keysTransport.mu.Unlock()
	v.keysTransport.refreshInterval = d
}
