package approvals

// Inbound is the configured surface name when it takes requests (web's
// POST /surfaces/{name}[/…]).
func (a *Approvals) Inbound(name string) (Inbound, bool) {
	s, ok := a.Surface(name)
	if !ok {
		return nil, false
	}
	in, ok := s.(Inbound)
	return in, ok
}
