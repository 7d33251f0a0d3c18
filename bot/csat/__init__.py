"""Customer satisfaction: when to ask «Помогли ли мы вам?», asking once, recording the press."""
