"""The apiserver's protobuf encoding, for the few reads where its size matters (see node_list.py)."""
