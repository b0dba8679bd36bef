package outbound

// Reconfigure replaces the transport's whole configuration while it
// serves requests, with the contract of inbound.Middleware.Reconfigure:
// opts is validated as New validates it, an invalid field is the same
// *resilience.ConfigError naming it, and then nothing changes. Otherwise
// every part changes at once (Base, Pipeline, AttemptTimeout,
// RetryNonIdempotent, and with no Pipeline the default one's Budget and
// Throttle): a request reads the configuration once, when RoundTrip
// starts, so a request under way finishes wholly under the old one (its
// retries and hedges included) and the next starts wholly under the new
// one; nothing is sent twice or dropped by the change.
//
// Everything can change live. A pipeline holds the state of its
// strategies (a circuit breaker's state, a hedge's history): pass the
// same Pipeline to keep it. With Pipeline nil a new default pipeline is
// built, whose retry has no state of its own (a Budget or Throttle
// given again keeps theirs, since they are shared values). Safe for
// concurrent use with requests and other calls of Reconfigure; the last
// call to return is in force.
func (t *Transport) Reconfigure(opts Options) error {
	c, err := build(opts)
	if err != nil {
		return err
	}
	t.cfg.Store(c)
	return nil
}
