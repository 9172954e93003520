"""What every plan kind's writers share: `OutputDir`, a directory they cannot leave and never
overwrite by accident. The writers themselves live with their kind (Galapagos:
`strategies/galapagos/emit`)."""
