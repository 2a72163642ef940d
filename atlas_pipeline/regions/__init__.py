"""Regions (seed 000 ch. 16): the ownership rules (ownership.py), the control plane that grants
origin leases (control_plane.py) and a region's side of it in a fetch batch (keeper.py)."""
