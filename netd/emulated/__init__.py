"""Emulated hardware: sysfs-shaped trees and fabrics that the real sources read (DESIGN §7)."""
