"""memlab"""
