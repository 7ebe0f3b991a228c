"""Store factories an operator names in `memwarden backend add --factory`: stores that work offline,
embedding with Memwarden's bundled model, in a database every Memwarden process reaches."""
