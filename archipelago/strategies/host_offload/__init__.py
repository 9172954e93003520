"""Intel CPU + multi-FPGA row (seeds/003): applications written with the CPU / FPGA /
communication API of Table I, weights persistent in the cards' on-chip memories.

    program    the API calls and the recorded Program (the plan's dynamic half)
    partition  row / column / RxC blocks, LSTM units split
    layout     which blocks each card holds, their overlay programs
    apps       matvec, LSTM, NMT-Luong and NMT-Li written with the API
    plan       HostPlan: layout + Program + per-card NPU designs and PCIe links
    proxies    CPU call proxies measured with numpy, stored as profiles
    estimate   the modelling tool: aggregate latency, breakdown, bottleneck calls
    sizing     fewest cards per device type for a latency target; largest persistent model
"""
