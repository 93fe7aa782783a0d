"""Study: exact linear stability of the uniform density (MODEL.md section 3), PDE and particles."""
