"""The Usage page: totals, a chart per day and agent, tables per chat/agent/day, plan limits."""
