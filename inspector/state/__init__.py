"""The dashboard's state as a pure fold over observations (no Textual): `fold` (DashboardState and its entries),
`travel` (time travel: History, state_at)."""
